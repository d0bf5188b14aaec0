// The global generator: a seed and a running offset into its Philox stream. Each draw of n numbers
// takes the next ceil(n / 4) counters, so results depend only on the seed and the order of draws.
#pragma once
#include <cstdint>

namespace loupe {

// Where one draw's Philox counters start: offset, plus *base when base is set. Kernels add *base
// on the device: inside a captured CUDA graph, base is a device word that every replay advances by
// the step's draws, so each replay draws what the next eager step would have.
struct RngDraw {
  uint64_t seed = 0, offset = 0;
  const uint64_t* base = nullptr;
};

struct Generator {
  uint64_t seed = 0x5eed;
  uint64_t offset = 0;
  // Set while a CUDA graph is captured (train/step_graph.h): draws are relative to capture_start
  // and read the device word graph_base.
  const uint64_t* graph_base = nullptr;
  uint64_t capture_start = 0;
  // Reserves counters for n numbers and returns the offset the draw starts at.
  uint64_t take(uint64_t n) {
    uint64_t o = offset;
    offset += (n + 3) / 4;
    return o;
  }
  // take(n), as kernels read it.
  RngDraw draw(uint64_t n) {
    uint64_t o = take(n);
    return graph_base ? RngDraw{seed, o - capture_start, graph_base} : RngDraw{seed, o, nullptr};
  }
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // also resets the offset

}  // namespace loupe
