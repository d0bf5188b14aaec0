// The IDX reader (data/idx.cpp) on raw files: header, dimensions, sizes, trailing bytes. (Bytes
// that start with the gzip magic take the gzip path here too; fuzz_idx_gz aims at it.)
#include "fuzz_idx_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file;
  loupe::fuzz::read_idx_checked(file, data, size);
  return 0;
}
