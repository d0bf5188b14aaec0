// The image decoder (data/image_decode_stb.cpp: the checks of data/image_check.cpp, then
// stb_image) on the bytes as a file. A PNG is decoded twice: as it is (mostly refused by a CRC),
// and with every chunk's CRC and its zlib stream's Adler-32 made right, so that mutations of the
// header, the chunk order and the pixel data get past the checks and into stb_image.
#include <zlib.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/image_check.h"
#include "data/image_decode.h"
#include "fuzz_util.h"

namespace {

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}

// The chunks that lie wholly inside the file: (offset of the length field, data length).
std::vector<std::pair<size_t, uint32_t>> chunks(const std::vector<uint8_t>& b) {
  std::vector<std::pair<size_t, uint32_t>> out;
  for (size_t pos = 8; b.size() - pos >= 12;) {
    const uint32_t len = be32(&b[pos]);
    if (len > b.size() - pos - 12) break;
    out.emplace_back(pos, len);
    pos += 12 + size_t(len);
  }
  return out;
}

std::vector<uint8_t> fix_png(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  const auto cs = chunks(b);
  // The IDAT data as one zlib stream: inflate its deflate body (after the 2-byte header) to find
  // where it ends and what it holds, and write the Adler-32 of that into the 4 bytes after it.
  std::vector<size_t> where;  // file offset of each byte of the stream
  for (const auto& [pos, len] : cs)
    if (std::memcmp(&b[pos + 4], "IDAT", 4) == 0)
      for (size_t k = 0; k < len; ++k) where.push_back(pos + 8 + k);
  if (where.size() > 2) {
    std::vector<uint8_t> z(where.size());
    for (size_t k = 0; k < z.size(); ++k) z[k] = b[where[k]];
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) __builtin_trap();
    zs.next_in = z.data() + 2;
    zs.avail_in = uInt(z.size() - 2);
    uLong adler = adler32(0, nullptr, 0);
    uint8_t out[32768];
    int rc;
    size_t produced;
    do {
      zs.next_out = out;
      zs.avail_out = sizeof out;
      rc = inflate(&zs, Z_NO_FLUSH);
      produced = sizeof out - zs.avail_out;
      adler = adler32(adler, out, uInt(produced));
    } while (rc == Z_OK && zs.total_out < (64u << 20) && (zs.avail_in > 0 || produced > 0));
    const size_t at = 2 + zs.total_in;
    if (rc == Z_STREAM_END && at + 4 <= z.size())
      for (int i = 0; i < 4; ++i) b[where[at + size_t(i)]] = uint8_t(adler >> (24 - 8 * i));
    inflateEnd(&zs);
  }
  for (const auto& [pos, len] : cs) put_be32(&b[pos + 8 + len], uint32_t(crc32(0, &b[pos + 4], uInt(len + 4))));
  return b;
}

void decode(loupe::fuzz::TempFile& file, const uint8_t* data, size_t size, int channels) {
  try {
    const loupe::data::DecodedImage img = loupe::data::decode_image(file.write(data, size), channels);
    if (img.width < 1 || img.height < 1 || img.width > loupe::data::kMaxImageSide ||
        img.height > loupe::data::kMaxImageSide || img.channels != channels ||
        img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(channels))
      __builtin_trap();
    loupe::fuzz::accepted("an image");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file;
  const int channels = size % 2 ? 3 : 1;
  decode(file, data, size, channels);
  if (size >= 8 && std::memcmp(data, "\x89PNG", 4) == 0) {
    const std::vector<uint8_t> fixed = fix_png(data, size);
    decode(file, fixed.data(), fixed.size(), 4 - channels);
  }
  return 0;
}
