// Data parallelism's pure parts (docs/multi-gpu.md): the ranks' shards of an epoch and the buckets
// of the gradient arena, checked on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "loader/sampler.h"
#include "parallel/ddp_plan.h"

using namespace loupe;

// Every global step's shards are disjoint and together are that step of one process at batch
// world*batch; at world 1 the shard is today's batch exactly; the tail is dropped.
TEST(Shard, RanksTogetherAreOneProcessAtTheGlobalBatch) {
  const std::vector<int32_t> order = loader::epoch_permutation(1003, 7, 2);
  for (int world : {1, 2, 3, 8}) {
    const int64_t b = 16;
    const int64_t steps = loader::shard_steps(1003, b, {0, world});
    EXPECT_EQ(steps, 1003 / (world * b)) << world;
    EXPECT_EQ(steps, loader::shard_steps(1003, world * b, {0, 1})) << "as many steps as one process at batch W*b";
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> all;
      for (int r = 0; r < world; ++r) {
        std::vector<int32_t> part = loader::shard_batch(order, s, b, {r, world});
        ASSERT_EQ(int64_t(part.size()), b);
        all.insert(all.end(), part.begin(), part.end());
      }
      std::vector<int32_t> one = loader::shard_batch(order, s, world * b, {0, 1});
      EXPECT_EQ(all, one) << "world " << world << " step " << s;
      EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), all.size()) << "shards overlap";
    }
  }
  EXPECT_THROW(loader::shard_batch(order, 1003 / 32, 16, {1, 2}), Error) << "past the last full step";
  EXPECT_THROW(loader::shard_steps(10, 2, {2, 2}), Error) << "rank out of range";
}

// Evaluation keeps every sample: contiguous parts in rank order, sizes within one of each other.
TEST(Shard, EvaluationPartsCoverEverySampleOnce) {
  for (int64_t n : {0, 1, 7, 10000, 10001}) {
    for (int world : {1, 2, 3, 7}) {
      int64_t next = 0, lo = n, hi = 0;
      for (int r = 0; r < world; ++r) {
        auto [a, b] = loader::shard_part(n, {r, world});
        EXPECT_EQ(a, next) << n << " " << world << " " << r;
        next = b;
        lo = std::min(lo, b - a), hi = std::max(hi, b - a);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1) << n << " " << world;
    }
  }
}

// Buckets from the last parameter back, each a contiguous slice holding its parameters (padding
// between them included), every parameter in exactly one, a small first bucket, a parameter
// larger than the cap alone.
namespace {
// Parameters of these sizes laid out as the gradient arena lays them: each aligned to 64 elements.
std::vector<parallel::ParamSlot> arena_slots(const std::vector<int64_t>& sizes) {
  std::vector<parallel::ParamSlot> slots;
  int64_t at = 0;
  for (int64_t n : sizes) {
    slots.push_back({at, n});
    at += (n + 63) / 64 * 64;
  }
  return slots;
}
}  // namespace

TEST(DdpPlan, BucketsAreContiguousSlicesFromTheLastParameter) {
  // mnist_mlp-like: W1 784x512, b1, W2 512x512, b2, W3 512x10, b3, each aligned to 64 elements.
  std::vector<int64_t> sizes{784 * 512, 512, 512 * 512, 512, 512 * 10, 10};
  const std::vector<parallel::ParamSlot> slots = arena_slots(sizes);
  const int64_t mib = 1 << 20;
  std::vector<parallel::Bucket> b = parallel::plan_buckets(slots, 4, 1 * mib, 16 * 1024);
  std::vector<int> seen;
  for (const auto& k : b) {
    ASSERT_FALSE(k.params.empty());
    for (size_t i = 1; i < k.params.size(); ++i) EXPECT_EQ(k.params[i], k.params[i - 1] - 1) << "backward order";
    const auto& first = slots[size_t(k.params.back())];
    const auto& last = slots[size_t(k.params.front())];
    EXPECT_EQ(k.offset, first.offset);
    EXPECT_EQ(k.offset + k.numel, last.offset + last.numel);
    seen.insert(seen.end(), k.params.begin(), k.params.end());
  }
  std::vector<int> want(sizes.size());
  std::iota(want.rbegin(), want.rend(), 0);
  EXPECT_EQ(seen, want) << "every parameter once, last first";
  // First bucket: b3, W3 (20,520 bytes >= 16 KiB); then b2 + W2 (1 MiB + 2 KiB >= 1 MiB); then
  // b1 + W1 (W1 alone is 1.5 MiB, above the cap, but b1 comes first and joins it).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<int>{5, 4}));
  EXPECT_EQ(b[1].params, (std::vector<int>{3, 2}));
  EXPECT_EQ(b[2].params, (std::vector<int>{1, 0}));
  // One bucket for everything when the cap is large; one per parameter when it is tiny.
  EXPECT_EQ(parallel::plan_buckets(slots, 4, 1LL << 40, 1LL << 40).size(), 1u);
  EXPECT_EQ(parallel::plan_buckets(slots, 4, 1, 1).size(), sizes.size());
  EXPECT_TRUE(parallel::plan_buckets({}, 4, mib, mib).empty());
  EXPECT_THROW(parallel::plan_buckets({{100, 10}, {50, 10}}, 4, mib, mib), Error) << "out of arena order";
}

// imdb_bilstm's shape, in the order its backward finishes when the LSTM hands on its input's
// gradient first (Node::later_inputs): the dense layer, the embedding, a pause for the LSTM's weight
// GEMMs, then the LSTM. The embedding goes alone at the pause, overlapping those GEMMs, instead of
// waiting in one 10.1 MiB bucket with the LSTM; every bucket stays one slice of the arena.
TEST(DdpPlan, AnOrderSeenAndItsPausesCutTheBuckets) {
  std::vector<int64_t> sizes{20000 * 128, 99328, 128, 1};
  const std::vector<parallel::ParamSlot> slots = arena_slots(sizes);
  const int64_t mib = 1 << 20;
  std::vector<parallel::Bucket> b = parallel::plan_buckets(slots, {3, 2, 0, 1}, {3}, 4, 25 * mib, mib);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<int>{3, 2}));  // the embedding does not extend the dense layer's slice
  EXPECT_EQ(b[1].params, (std::vector<int>{0}));     // closed by the pause
  EXPECT_EQ(b[2].params, (std::vector<int>{1}));
  EXPECT_EQ(b[0].offset, slots[2].offset);
  EXPECT_EQ(b[0].numel, slots[3].offset + 1 - slots[2].offset);
  EXPECT_EQ(b[1].offset, 0);
  EXPECT_EQ(b[1].numel, sizes[0]);
  // Without the pause the LSTM extends the embedding's slice upward and joins it.
  b = parallel::plan_buckets(slots, {3, 2, 0, 1}, {}, 4, 25 * mib, mib);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].params, (std::vector<int>{0, 1}));
  EXPECT_EQ(b[1].numel, slots[1].offset + sizes[1]);
  // The plain order (last parameter first, no pauses) is plan_buckets without an order.
  auto same = [](const std::vector<parallel::Bucket>& x, const std::vector<parallel::Bucket>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].params != y[i].params || x[i].offset != y[i].offset || x[i].numel != y[i].numel) return false;
    return true;
  };
  EXPECT_TRUE(same(parallel::plan_buckets(slots, {3, 2, 1, 0}, {}, 4, mib, 1024), parallel::plan_buckets(slots, 4, mib, 1024)));
  EXPECT_THROW(parallel::plan_buckets(slots, {3, 2, 2, 0}, {}, 4, mib, mib), Error) << "a parameter twice";
  EXPECT_THROW(parallel::plan_buckets(slots, {3, 2, 0}, {}, 4, mib, mib), Error) << "a parameter missing";
}

// A pause right after the first gradient (an LSTM whose input's gradient is the first to come, the
// weights' after its GEMMs): that gradient goes alone at once, and a pause after the last changes
// nothing; pauses at every position give a bucket per parameter.
TEST(DdpPlan, APauseAfterTheFirstGradientSendsItAlone) {
  const std::vector<parallel::ParamSlot> slots = arena_slots({100, 100, 100});
  const int64_t big = 1LL << 40;
  std::vector<parallel::Bucket> b = parallel::plan_buckets(slots, {2, 1, 0}, {1}, 4, big, big);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].params, (std::vector<int>{2}));
  EXPECT_EQ(b[0].offset, slots[2].offset);
  EXPECT_EQ(b[0].numel, 100);
  EXPECT_EQ(b[1].params, (std::vector<int>{1, 0}));
  EXPECT_EQ(b[1].offset, 0);
  EXPECT_EQ(b[1].numel, slots[1].offset + 100);
  EXPECT_EQ(parallel::plan_buckets(slots, {2, 1, 0}, {}, 4, big, big).size(), 1u);
  EXPECT_EQ(parallel::plan_buckets(slots, {2, 1, 0}, {3}, 4, big, big).size(), 1u);
  b = parallel::plan_buckets(slots, {0, 1, 2}, {1, 2}, 4, big, big);
  ASSERT_EQ(b.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b[size_t(i)].params, (std::vector<int>{i}));
}
