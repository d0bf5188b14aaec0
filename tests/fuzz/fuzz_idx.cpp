// The IDX reader (data/idx.cpp) on raw files: header, dimensions, sizes, trailing bytes. (Bytes
// that start with the gzip magic take the gzip path here too; fuzz_idx_gz aims at it.)
#include "core/error.h"
#include "data/idx.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file;
  try {
    const loupe::data::IdxArray a = loupe::data::read_idx(file.write(data, size));
    // What the reader promises: the data is exactly the product of the dimensions.
    size_t n = 1;
    for (int64_t d : a.dims) n *= size_t(d);
    if (n != a.data.size()) __builtin_trap();
    loupe::fuzz::accepted("an IDX array");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  return 0;
}
