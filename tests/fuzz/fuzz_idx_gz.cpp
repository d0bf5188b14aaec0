// The IDX reader's gzip path (data/idx.cpp's bounded inflate): the bytes as a .gz file, and the
// bytes gzip-compressed, so that both the compressed stream and the IDX header inside it are
// explored (a header declaring little in front of a stream inflating to much, several members,
// trailing bytes, truncation).
#include <zlib.h>

#include <vector>

#include "fuzz_idx_check.h"

namespace {

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::vector<uint8_t> out(deflateBound(&zs, uLong(size)));
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = uInt(size);
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file(".gz");
  loupe::fuzz::read_idx_checked(file, data, size);
  const std::vector<uint8_t> z = gzip(data, size);
  loupe::fuzz::read_idx_checked(file, z.data(), z.size());
  return 0;
}
