// One IDX input through data::read_idx, for the raw and the gzip targets: a clean rejection, or an
// array that keeps the reader's promise (its data is exactly the product of its dimensions).
#pragma once
#include <cstdint>

#include "core/error.h"
#include "data/idx.h"
#include "fuzz_util.h"

namespace loupe::fuzz {

inline void read_idx_checked(TempFile& file, const uint8_t* data, size_t size) {
  try {
    const data::IdxArray a = data::read_idx(file.write(data, size));
    size_t n = 1;
    for (int64_t d : a.dims) n *= size_t(d);
    if (n != a.data.size()) __builtin_trap();
    accepted("an IDX array");
  } catch (const Error& e) {
    rejected(e);
  }
}

}  // namespace loupe::fuzz
