// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a counter-based
// generator, so element i of a draw is a pure function of (seed, offset, i) and the CPU and the GPU
// produce identical dropout masks and initial weights.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define LOUPE_HD __host__ __device__ __forceinline__
#else
#define LOUPE_HD inline
#endif

namespace loupe {

struct Philox4 { uint32_t v[4]; };

LOUPE_HD uint32_t philox_mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *lo = uint32_t(p);
  return uint32_t(p >> 32);
}

// Four 32-bit random words for counter `ctr` (64 bits) and subsequence `sub`, under key `seed`.
LOUPE_HD Philox4 philox(uint64_t seed, uint64_t ctr, uint64_t sub) {
  uint32_t c0 = uint32_t(ctr), c1 = uint32_t(ctr >> 32), c2 = uint32_t(sub), c3 = uint32_t(sub >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t lo0, lo1;
    uint32_t hi0 = philox_mulhi(0xD2511F53u, c0, &lo0);
    uint32_t hi1 = philox_mulhi(0xCD9E8D57u, c2, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform float in [0, 1) from 24 random bits (exactly representable, identical on host and device).
LOUPE_HD float uniform01(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

// Element i of the uniform stream (seed, offset): word i % 4 of counter offset + i / 4.
LOUPE_HD float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 r = philox(seed, offset + i / 4, 0);
  return uniform01(r.v[i % 4]);
}

}  // namespace loupe
