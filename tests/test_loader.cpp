// The asynchronous loader: coverage, determinism across worker counts, errors, shutdown, one
// rank's shard of each global step, and (on a GPU) pinned against pageable slots.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/denormals.h"
#include "core/error.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "loupe.h"
#include "skip.h"

using namespace loupe;
using namespace loupe::loader;

namespace {
// Sample i is the vector (i, i + 0.5) with label i % 7; sample `bad` throws.
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{2}; }
  void get(int64_t i, float* x, int32_t* y, uint64_t) const override {
    if (i == bad_) throw std::runtime_error("corrupt record");
    x[0] = float(i);
    x[1] = float(i) + 0.5f;
    *y = int32_t(i % 7);
  }

 private:
  int64_t n_, bad_;
};

// CountingDataset that counts its get() calls.
class CallCountingDataset : public CountingDataset {
 public:
  using CountingDataset::CountingDataset;
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override {
    ++calls;
    CountingDataset::get(i, x, y, rng);
  }
  mutable std::atomic<int64_t> calls{0};
};

// The sample indices of each batch of an epoch, read back from the samples' values.
std::vector<std::vector<int32_t>> epoch_batches(DataLoader& dl, int epoch) {
  std::vector<std::vector<int32_t>> batches;
  dl.start_epoch(epoch);
  Batch b;
  while (dl.next(b)) {
    EXPECT_EQ(b.index, int64_t(batches.size()));
    std::vector<float> x = b.x.to_vector<float>();
    std::vector<int32_t> y = b.y.to_vector<int32_t>();
    EXPECT_EQ(int64_t(y.size()), b.size);
    std::vector<int32_t>& seen = batches.emplace_back();
    for (int64_t k = 0; k < b.size; ++k) {
      EXPECT_EQ(x[size_t(2 * k + 1)], x[size_t(2 * k)] + 0.5f);
      EXPECT_EQ(y[size_t(k)], int32_t(x[size_t(2 * k)]) % 7);
      seen.push_back(int32_t(x[size_t(2 * k)]));
    }
    dl.release(b);
  }
  return batches;
}

std::vector<float> epoch_samples(DataLoader& dl, int epoch) {
  std::vector<float> seen;
  for (const std::vector<int32_t>& batch : epoch_batches(dl, epoch))
    for (int32_t i : batch) seen.push_back(float(i));
  return seen;
}

std::vector<int32_t> epoch_order(int64_t n, const LoaderOptions& o, int epoch) {
  if (o.shuffle) return epoch_permutation(n, o.seed, epoch);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  return order;
}
}  // namespace

// The epoch's order is a uniform shuffle: over 6,000 epochs of 3 samples every one of the 6 orders
// comes about 1,000 times (an off-by-one in Fisher-Yates, Sattolo's variant, makes only the 2
// cyclic ones; 150 is about 5 standard deviations).
// The process's FTZ/DAZ setting (core/denormals.h) reaches the loader's workers: augmentation and
// normalisation are float work too. Each sample records whether its worker flushes.
TEST(Loader, WorkersTakeTheDenormalSetting) {
  struct Probe : Dataset {
    int64_t size() const override { return 64; }
    Shape sample_shape() const override { return Shape{1}; }
    void get(int64_t, float* x, int32_t* y, uint64_t) const override {
      x[0] = thread_flushes_denormals() ? 1.f : 0.f;
      *y = 0;
    }
  };
  for (bool on : {true, false}) {
    DenormalScope mode(on);
    // The workers start from this thread's register: set it the other way, so that only a worker
    // that applies the setting itself has it.
    _mm_setcsr(on ? (_mm_getcsr() & ~0x8040u) : (_mm_getcsr() | 0x8040u));
    ASSERT_NE(thread_flushes_denormals(), on);
    LoaderOptions o;
    o.batch = 8;
    o.workers = 3;
    DataLoader dl(std::make_shared<Probe>(), o);
    dl.start_epoch(1);
    Batch b;
    int batches = 0;
    while (dl.next(b)) {
      for (float v : b.x.to_vector<float>()) EXPECT_EQ(v, on ? 1.f : 0.f) << "setting " << on;
      dl.release(b);
      ++batches;
    }
    EXPECT_EQ(batches, 8);
  }
}

TEST(Sampler, EpochPermutationIsUniform) {
  std::map<std::vector<int32_t>, int> seen;
  for (int e = 0; e < 6000; ++e) ++seen[epoch_permutation(3, 1, e)];
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& [order, count] : seen) EXPECT_NEAR(count, 1000, 150);
}

TEST(Loader, EverySampleOncePerEpoch) {
  LoaderOptions o;
  o.batch = 32;
  o.workers = 3;
  o.prefetch = 2;
  DataLoader dl(std::make_shared<CountingDataset>(1000), o);
  EXPECT_EQ(dl.batches_per_epoch(), 32);
  for (int e = 1; e <= 2; ++e) {
    std::vector<float> s = epoch_samples(dl, e);
    ASSERT_EQ(s.size(), 1000u);
    std::sort(s.begin(), s.end());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(s[size_t(i)], float(i));
  }
}

TEST(Loader, OrderDependsOnSeedAndEpochNotOnWorkers) {
  auto run = [](int workers, int epoch) {
    LoaderOptions o;
    o.batch = 50;
    o.workers = workers;
    o.prefetch = 3;
    DataLoader dl(std::make_shared<CountingDataset>(999), o);
    return epoch_samples(dl, epoch);
  };
  std::vector<float> one = run(1, 4);
  EXPECT_EQ(one, run(8, 4));
  EXPECT_NE(one, run(8, 5));
}

// An epoch started ahead (while the one before ends: Trainer::train_epoch) serves exactly the
// batches the same epoch started at its beginning serves; a different epoch asked for instead
// abandons it; one never asked for (the run's last) does not hold up destruction; and one started
// ahead while the epoch before was cut short (--max-steps) is served whole.
TEST(Loader, AnEpochStartedAheadIsThatEpoch) {
  LoaderOptions o;
  o.batch = 30;
  o.workers = 3;
  o.prefetch = 3;
  auto data = std::make_shared<CountingDataset>(500);
  DataLoader plain(data, o), ahead(data, o);
  for (int e = 1; e <= 3; ++e) {
    const auto want = epoch_batches(plain, e);
    EXPECT_EQ(epoch_batches(ahead, e), want) << "epoch " << e;  // its start_epoch(e) takes the ahead one over
    ahead.start_epoch_ahead(e + 1);
  }
  EXPECT_EQ(epoch_batches(ahead, 6), epoch_batches(plain, 6));  // epoch 4 was started ahead: abandoned
  {
    DataLoader cut(data, o);
    cut.start_epoch(1);
    Batch b;
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(cut.next(b));
      cut.release(b);
    }
    cut.start_epoch_ahead(2);  // 15 of epoch 1's 17 batches never taken
    EXPECT_EQ(epoch_batches(cut, 2), epoch_batches(plain, 2));
    cut.start_epoch_ahead(3);
  }  // destroyed with epoch 3 under way
  // Taken over, not started again: the batches collated ahead are not collated twice.
  auto counted = std::make_shared<CallCountingDataset>(500);
  DataLoader dl(counted, o);
  epoch_batches(dl, 1);
  dl.start_epoch_ahead(2);
  for (int i = 0; i < 200 && counted->calls < 500 + 3 * 30; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(counted->calls.load(), 500 + 3 * 30);  // epoch 1, and the three slots' batches of epoch 2
  epoch_batches(dl, 2);
  EXPECT_EQ(counted->calls.load(), 1000);
}

TEST(Loader, DropLast) {
  LoaderOptions o;
  o.batch = 64;
  o.drop_last = true;
  DataLoader dl(std::make_shared<CountingDataset>(1000), o);
  EXPECT_EQ(dl.batches_per_epoch(), 15);
  EXPECT_EQ(epoch_samples(dl, 1).size(), 960u);
  o.batch = 2000;
  EXPECT_THROW(DataLoader dl2(std::make_shared<CountingDataset>(1000), o), loupe::Error);
  o.drop_last = false;  // smaller than one batch is an error either way
  try {
    DataLoader dl3(std::make_shared<CountingDataset>(1000), o);
    FAIL() << "expected an error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one batch of 2000"), std::string::npos) << e.what();
  }
}

TEST(Loader, WorkerExceptionSurfacesWithTheSampleIndex) {
  LoaderOptions o;
  o.batch = 10;
  o.workers = 4;
  DataLoader dl(std::make_shared<CountingDataset>(100, 37), o);
  try {
    epoch_samples(dl, 1);
    FAIL() << "expected the worker's error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 37"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupt record"), std::string::npos) << e.what();
  }
}

TEST(Loader, EarlyShutdownNeverHangs) {
  for (int i = 0; i < 300; ++i) {
    LoaderOptions o;
    o.batch = 8;
    o.workers = 1 + i % 8;
    o.prefetch = 1 + i % 4;
    DataLoader dl(std::make_shared<CountingDataset>(500), o);
    dl.start_epoch(1);
    Batch b;
    for (int k = 0; k < i % 5; ++k) {
      ASSERT_TRUE(dl.next(b));
      dl.release(b);
    }
    if (i % 3 == 0) dl.start_epoch(2);  // abandon an epoch midway
  }  // destruction stops the workers
}

// W=3 ranks at batch b: each step's three batches are disjoint and, in rank order, are exactly that
// step's W*b indices of the epoch's order, which is the batch one process sees at batch W*b. The
// tail of 1000 - 10*96 = 40 samples is dropped although drop_last is off.
TEST(LoaderShard, RanksSplitEachGlobalStepInOrder) {
  const int64_t n = 1000, b = 32;
  const int world = 3, epoch = 2;
  for (bool shuffle : {true, false}) {
    SCOPED_TRACE(shuffle ? "shuffled" : "in order");
    LoaderOptions o;
    o.batch = b;
    o.shuffle = shuffle;
    o.prefetch = 3;
    const int64_t steps = shard_steps(n, b, {0, world});
    ASSERT_EQ(steps, 10);
    std::vector<std::vector<std::vector<int32_t>>> ranks;  // [rank][step] -> indices
    for (int r = 0; r < world; ++r) {
      o.shard = {r, world};
      o.workers = 1 + 2 * r;  // the shard must not depend on the worker count
      DataLoader dl(std::make_shared<CountingDataset>(n), o);
      EXPECT_EQ(dl.batches_per_epoch(), steps);
      ranks.push_back(epoch_batches(dl, epoch));
      ASSERT_EQ(int64_t(ranks.back().size()), steps) << "rank " << r;
      for (const auto& batch : ranks.back()) EXPECT_EQ(int64_t(batch.size()), b) << "rank " << r;
    }

    LoaderOptions one = o;  // one process at batch W*b
    one.shard = {};
    one.batch = world * b;
    one.drop_last = true;
    DataLoader single(std::make_shared<CountingDataset>(n), one);
    std::vector<std::vector<int32_t>> global = epoch_batches(single, epoch);
    ASSERT_EQ(int64_t(global.size()), steps);

    const std::vector<int32_t> order = epoch_order(n, o, epoch);
    std::set<int32_t> all;
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> step;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(ranks[size_t(r)][size_t(s)], shard_batch(order, s, b, {r, world})) << "rank " << r << " step " << s;
        step.insert(step.end(), ranks[size_t(r)][size_t(s)].begin(), ranks[size_t(r)][size_t(s)].end());
      }
      EXPECT_EQ(step, std::vector<int32_t>(order.begin() + s * world * b, order.begin() + (s + 1) * world * b))
          << "step " << s;
      EXPECT_EQ(step, global[size_t(s)]) << "step " << s;
      all.insert(step.begin(), step.end());
    }
    EXPECT_EQ(int64_t(all.size()), steps * world * b) << "the ranks' batches overlap";
  }
}

// A shard of world 1 is today's loader: the same batches in the same order, and drop_last still
// decides whether the partial last batch (1000 = 15*64 + 40) is served.
TEST(LoaderShard, WorldOneIsTheUnshardedLoader) {
  for (bool drop_last : {false, true}) {
    for (bool shuffle : {true, false}) {
      SCOPED_TRACE(std::string(drop_last ? "drop_last" : "keep last") + (shuffle ? ", shuffled" : ", in order"));
      LoaderOptions o;
      o.batch = 64;
      o.drop_last = drop_last;
      o.shuffle = shuffle;
      DataLoader plain(std::make_shared<CountingDataset>(1000), o);
      o.shard = Shard{0, 1};
      DataLoader sharded(std::make_shared<CountingDataset>(1000), o);
      EXPECT_EQ(sharded.batches_per_epoch(), drop_last ? 15 : 16);
      EXPECT_EQ(sharded.batches_per_epoch(), plain.batches_per_epoch());
      std::vector<std::vector<int32_t>> a = epoch_batches(sharded, 3);
      EXPECT_EQ(a, epoch_batches(plain, 3));
      ASSERT_EQ(a.size(), size_t(drop_last ? 15 : 16));
      EXPECT_EQ(a.back().size(), drop_last ? 64u : 40u);
      const std::vector<int32_t> order = epoch_order(1000, o, 3);
      for (size_t k = 0; k < a.size(); ++k) {
        const int64_t first = int64_t(k) * 64;
        EXPECT_EQ(a[k], std::vector<int32_t>(order.begin() + first, order.begin() + first + int64_t(a[k].size())));
      }
    }
  }
}

TEST(LoaderShard, BadShardIsAClearError) {
  auto error_of = [](int64_t n, int64_t batch, Shard shard) -> std::string {
    LoaderOptions o;
    o.batch = batch;
    o.shard = shard;
    try {
      DataLoader dl(std::make_shared<CountingDataset>(n), o);
    } catch (const loupe::Error& e) {
      return e.what();
    }
    return "";
  };
  for (Shard bad : {Shard{3, 3}, Shard{-1, 3}, Shard{0, 0}}) {
    std::string e = error_of(100, 8, bad);
    EXPECT_NE(e.find("rank " + std::to_string(bad.rank) + " is outside a world of " + std::to_string(bad.world)),
              std::string::npos)
        << "rank " << bad.rank << " of " << bad.world << ": '" << e << "'";
  }
  // 100 samples hold one batch of 32 but not a global step of 4 x 32.
  std::string e = error_of(100, 32, {1, 4});
  EXPECT_NE(e.find("fewer than one global step of 4 ranks x 32"), std::string::npos) << e;
  EXPECT_NE(e.find("use a smaller --batch or fewer --gpus"), std::string::npos) << e;
  EXPECT_EQ(error_of(96, 32, {2, 3}), "") << "exactly one global step is enough";
  LoaderOptions o;
  o.batch = 32;
  o.shard = {2, 3};
  DataLoader dl(std::make_shared<CountingDataset>(96), o);
  std::vector<std::vector<int32_t>> batches = epoch_batches(dl, 1);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0], shard_batch(epoch_permutation(96, o.seed, 1), 0, 32, {2, 3}));
}

TEST(LoaderGpu, PinnedAndPageableGiveIdenticalBatches) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device: pinned vs pageable not run";
  auto run = [](bool pinned) {
    LoaderOptions o;
    o.batch = 64;
    o.pin_memory = pinned;
    o.device = kCUDA;
    DataLoader dl(std::make_shared<CountingDataset>(1000), o);
    return epoch_samples(dl, 3);
  };
  std::vector<float> a = run(true);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, run(false));
}

// A host ahead of a busy GPU waits for the slots the GPU still holds (a slot's next copy waits
// for the step that read it): that wait is the GPU's (gpu_wait_ms), not a loader too slow.
TEST(LoaderGpu, AWaitForTheGpuIsNotADataWait) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  LoaderOptions o;
  o.batch = 64;
  o.prefetch = 2;
  o.workers = 2;
  o.device = kCUDA;
  DataLoader dl(std::make_shared<CountingDataset>(64 * 40), o);
  Tensor a = to(full(Shape{4096, 4096}, 0.001, DType::f32), kCUDA);
  (void)matmul(a, a).to_vector<float>();
  dl.start_epoch(1);
  Batch b;
  double wait = 0, gpu = 0;
  for (int n = 0; dl.next(b); ++n) {
    if (n >= 4) wait += b.wait_ms, gpu += b.gpu_wait_ms;  // past the ring's first fill
    EXPECT_LE(b.gpu_wait_ms, b.wait_ms + 1e-9);
    Tensor c = a;  // a step of several milliseconds on the GPU, behind which the slot is released
    for (int i = 0; i < 5; ++i) c = matmul(c, a);
    dl.release(b);
  }
  cuda_runtime()->synchronize();
  EXPECT_GT(wait, 50) << "the host ran ahead of the GPU and waited for it";
  EXPECT_GT(gpu, 0.9 * wait) << "of " << wait << " ms waited, " << gpu << " ms for the GPU";
}
