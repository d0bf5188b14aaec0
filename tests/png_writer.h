// A minimal PNG writer over zlib, byte for byte, for the tests that need crafted PNG files:
// test_image_folder.cpp (the image-folder reader) and fuzz/make_corpus.cpp (the image corpus,
// which must come out byte-identical to the committed one: do not change what this writes).
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace loupe::test {

using Bytes = std::vector<uint8_t>;

// A big-endian 32-bit value (PNG's and IDX's byte order).
inline void put32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

// One chunk: length, type, data, and the CRC-32 of type and data.
inline void chunk(Bytes& png, const char* type, const Bytes& data) {
  put32(png, uint32_t(data.size()));
  Bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  put32(png, uint32_t(crc32(0, body.data(), uInt(body.size()))));
}

// A PNG from its parts.
struct Png {
  int w = 4, h = 4, depth = 8, color = 0, interlace = 0;  // IHDR's fields (deflate, filter method 0)
  Bytes raw;                      // the image data before compression, filter bytes included
  Bytes plte;                     // written before IDAT when not empty
  int level = 6;                  // zlib's level
  size_t idat_size = SIZE_MAX;    // IDAT chunks of at most this many bytes
  std::function<void(Bytes&)> edit_z;  // changes the zlib stream (say, its Adler-32) before it is cut into
                                       // chunks, whose CRCs stay valid
  std::vector<std::pair<std::string, Bytes>> before_idat;  // extra chunks after IHDR (and PLTE)
};

inline Bytes make_png(const Png& p) {
  Bytes z(compressBound(uLong(p.raw.size())));
  uLongf zn = uLongf(z.size());
  if (compress2(z.data(), &zn, p.raw.data(), uLong(p.raw.size()), p.level) != Z_OK)
    throw std::runtime_error("make_png: zlib's compress2 failed");
  z.resize(zn);
  if (p.edit_z) p.edit_z(z);
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put32(ihdr, uint32_t(p.w));
  put32(ihdr, uint32_t(p.h));
  ihdr.insert(ihdr.end(), {uint8_t(p.depth), uint8_t(p.color), 0, 0, uint8_t(p.interlace)});
  chunk(out, "IHDR", ihdr);
  if (!p.plte.empty()) chunk(out, "PLTE", p.plte);
  for (const auto& [type, data] : p.before_idat) chunk(out, type.c_str(), data);
  for (size_t k = 0; k < z.size(); k += p.idat_size)
    chunk(out, "IDAT", Bytes(z.begin() + std::ptrdiff_t(k), z.begin() + std::ptrdiff_t(std::min(z.size(), k + p.idat_size))));
  chunk(out, "IEND", {});
  return out;
}

}  // namespace loupe::test
