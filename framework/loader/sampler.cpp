#include "loader/sampler.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "core/error.h"
#include "core/philox.h"

namespace loupe::loader {

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t(i);
  for (int64_t i = n - 1; i > 0; --i) {
    Philox4 r = philox(seed, uint64_t(i), 0x9e3779b97f4a7c15ULL + uint64_t(epoch));
    uint64_t u = (uint64_t(r.v[0]) << 32) | r.v[1];
    std::swap(p[size_t(i)], p[size_t(u % uint64_t(i + 1))]);
  }
  return p;
}

namespace {
void check_rank_in_world(const Shard& s) {
  LOUPE_CHECK(s.world >= 1 && s.rank >= 0 && s.rank < s.world, "rank ", s.rank, " of a world of ", s.world,
              ": the rank must be from 0 to world - 1");
}
}  // namespace

int64_t shard_steps(int64_t n, int64_t batch, Shard s) {
  check_rank_in_world(s);
  LOUPE_CHECK(batch >= 1 && n >= 0, "shard_steps: batch ", batch, ", n ", n);
  return n / (int64_t(s.world) * batch);
}

int64_t shard_offset(int64_t step, int64_t batch, Shard s) {
  check_rank_in_world(s);
  return (step * s.world + s.rank) * batch;
}

std::vector<int32_t> shard_batch(const std::vector<int32_t>& order, int64_t step, int64_t batch, Shard s) {
  const int64_t steps = shard_steps(int64_t(order.size()), batch, s);
  LOUPE_CHECK(step >= 0 && step < steps, "global step ", step, " of an epoch of ", steps, " steps");
  const int64_t first = shard_offset(step, batch, s);
  return std::vector<int32_t>(order.begin() + first, order.begin() + first + batch);
}

std::pair<int64_t, int64_t> shard_part(int64_t n, Shard s) {
  check_rank_in_world(s);
  const int64_t q = n / s.world, r = n % s.world;  // the first r parts hold one more
  const int64_t first = s.rank * q + std::min<int64_t>(s.rank, r);
  return {first, first + q + (s.rank < r ? 1 : 0)};
}

}  // namespace loupe::loader
