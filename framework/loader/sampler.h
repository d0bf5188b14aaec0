// The order of an epoch: a Fisher-Yates shuffle driven by Philox(seed, epoch), so it depends on
// nothing but those two numbers (not on workers or devices). Shared by the loader and the
// resident-data path, so both train on the same batches.
#pragma once
#include <cstdint>
#include <vector>

namespace loupe::loader {

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch);

}  // namespace loupe::loader
