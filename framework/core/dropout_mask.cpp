#include "core/dropout_mask.h"

#include "core/philox.h"

namespace loupe {

// philox() of core/philox.h for kBlocks consecutive counters at once, lane by lane in each round
// (structure of arrays), so the 32x32->64-bit products vectorise.
void DropoutMask::refill(uint64_t i) {
  const uint64_t first = i / 4;
  start_ = first * 4;
  uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
  for (int l = 0; l < kBlocks; ++l) {
    const uint64_t c = offset_ + first + uint64_t(l);
    c0[l] = uint32_t(c);
    c1[l] = uint32_t(c >> 32);
    c2[l] = c3[l] = 0;  // sub-counter 0
  }
  uint32_t k0 = uint32_t(seed_), k1 = uint32_t(seed_ >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < kBlocks; ++l) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[l], p1 = uint64_t(0xCD9E8D57u) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0, n1 = uint32_t(p1);
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1, n3 = uint32_t(p0);
      c0[l] = n0;
      c1[l] = n1;
      c2[l] = n2;
      c3[l] = n3;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < kBlocks; ++l) {
    bits_[4 * l + 0] = uniform01(c0[l]) >= p_;
    bits_[4 * l + 1] = uniform01(c1[l]) >= p_;
    bits_[4 * l + 2] = uniform01(c2[l]) >= p_;
    bits_[4 * l + 3] = uniform01(c3[l]) >= p_;
  }
}

}  // namespace loupe
