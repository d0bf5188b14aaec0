// The order of an epoch: a Fisher-Yates shuffle driven by Philox(seed, epoch), so it depends on
// nothing but those two numbers (not on workers or devices). Shared by the loader and the
// resident-data path, so both train on the same batches.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace loupe::loader {

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch);

// Data parallelism (docs/multi-gpu.md): rank `rank` of `world` processes, each with a per-rank
// batch. Global step s takes the world*batch entries [s*world*batch, (s+1)*world*batch) of the
// epoch's order and rank r the `batch` of them from r*batch, so `world` ranks at batch b train on
// exactly the batches one process sees at batch world*b.
struct Shard {
  int rank = 0, world = 1;
};

// Full global steps in an epoch of n samples: floor(n / (world*batch)). The tail is dropped
// because a partial step would give the ranks different batch sizes and a different mean.
int64_t shard_steps(int64_t n, int64_t batch, Shard s);

// Where rank s.rank's part of global step `step` starts in the epoch's order: (step*world + rank)
// * batch. The one place this arithmetic lives: the loader (shard_batch) and the trainer's
// resident-data path both call it.
int64_t shard_offset(int64_t step, int64_t batch, Shard s);

// Rank s.rank's indices for global step `step` (< shard_steps) from the epoch's order.
std::vector<int32_t> shard_batch(const std::vector<int32_t>& order, int64_t step, int64_t batch, Shard s);

// Evaluation keeps every sample: rank r's contiguous part [first, second) of n, the parts' sizes
// differing by at most one and covering [0, n) in rank order.
std::pair<int64_t, int64_t> shard_part(int64_t n, Shard s);

}  // namespace loupe::loader
