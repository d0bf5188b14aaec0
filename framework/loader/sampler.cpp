#include "loader/sampler.h"

#include <cstddef>
#include <utility>

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

}  // namespace loupe::loader
