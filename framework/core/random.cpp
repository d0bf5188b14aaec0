#include "core/random.h"

namespace loupe {

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().seed = seed;
  default_generator().offset = 0;
}

}  // namespace loupe
