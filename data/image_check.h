// Checks on an image file's bytes before stb_image decodes them. stb_image checks neither a PNG's
// chunk CRCs nor its zlib stream's Adler-32, so a damaged PNG decodes into wrong pixels that are
// then trained on; and it allocates what a header declares before reading the data, so a small
// file with a hostile header could make it allocate gigabytes. These checks need only zlib.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace loupe::data {

// The largest image loupe decodes: at most 16384 pixels a side and 2^25 pixels in all (33.5
// million: a 24-megapixel photo, an 8K video frame). A 16-bit RGBA PNG at the limit decodes to
// 256 MiB; anything larger is refused from its header, before decoding.
constexpr int64_t kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = int64_t(1) << 25;
// The largest image file loupe reads, checked (stat) before it is read: the largest image it
// decodes, stored without compression (a PNG of 16-bit RGBA pixels), takes 256 MiB, and an eighth
// more leaves room for a PNG's filter bytes and its chunks' and deflate blocks' headers (a JPEG
// of that many pixels is far smaller). No larger file can be an image loupe decodes.
constexpr int64_t kMaxImageFileBytes = kMaxImagePixels * 8 + (kMaxImagePixels * 8) / 8;

// A file whose first bytes are "\x89PNG": the 8-byte signature; every chunk's length within the
// file and its CRC-32; IHDR first, with a valid bit depth and colour type and dimensions within
// the limits above; IDAT chunks consecutive; PLTE before IDAT for a palette image; IEND present
// (bytes after it are ignored, as libpng does); and the IDAT chunks' zlib stream inflating
// completely, with a valid Adler-32, to exactly the size IHDR implies (inflated through a 32 KiB
// scratch buffer, so a hostile stream costs time bounded by that size and no memory). Any failure
// is a loupe::Error naming `name` and what is wrong.
void check_png(const std::string& name, const uint8_t* data, size_t size);

// Whether stb_image takes the bytes for a JPEG: 0xff (with any more 0xff fill bytes), then SOI.
bool is_jpeg(const uint8_t* data, size_t size);

// A JPEG's structure, walked marker by marker from SOI to EOI as stb_image reads it: every segment
// within the file; each Huffman table with at most 256 codes (stb_image 2.27 overruns its tables
// with more); one frame header (SOF), whose dimensions are within the limits above, in a file large
// enough to hold that many 8x8 blocks (every complete JPEG spends at least one bit on each block, so
// a file under width x height / 1024 bytes is refused: stb_image allocates for the whole image
// before it reads the data); and the image data ending in an EOI marker. Any failure is a
// loupe::Error naming `name`.
void check_jpeg(const std::string& name, const uint8_t* data, size_t size);

}  // namespace loupe::data
