#include "data/image_check.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"

namespace loupe::data {
namespace {

const char* kReplace = "the file is damaged: replace or remove it";

std::string hex32(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", v);
  return s;
}

// A chunk type as text: its four letters, or escapes for anything else.
std::string type_text(const uint8_t* t) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (t[i] >= 0x20 && t[i] < 0x7f) {
      s += char(t[i]);
    } else {
      char e[8];
      std::snprintf(e, sizeof e, "\\x%02x", t[i]);
      s += e;
    }
  }
  return s;
}

bool is_letter(uint8_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

[[noreturn]] void bad_png(const std::string& name, const std::string& what, const char* fix = kReplace) {
  throw Error(name + ": corrupt PNG: " + what + "; " + fix);
}

void check_size(const std::string& name, const char* format, int64_t w, int64_t h) {
  if (w > kMaxImageSide || h > kMaxImageSide || w * h > kMaxImagePixels)
    throw Error(name + ": the " + format + " header declares " + std::to_string(w) + "x" + std::to_string(h) +
                " pixels, more than loupe decodes (at most " + std::to_string(kMaxImageSide) + " a side and " +
                std::to_string(kMaxImagePixels) + " pixels, so that a damaged or hostile header cannot make it "
                "allocate gigabytes); shrink the image beforehand, or remove it if it is damaged");
}

// The bytes a PNG's image data inflates to: each row of each (Adam7) pass a filter byte and its
// packed pixels. w, h <= kMaxImageSide and bits <= 64, so nothing here overflows.
uint64_t png_data_bytes(uint64_t w, uint64_t h, uint64_t bits_per_pixel, bool interlaced) {
  auto rows = [&](uint64_t pw, uint64_t ph) { return pw && ph ? ph * (1 + (pw * bits_per_pixel + 7) / 8) : 0; };
  if (!interlaced) return rows(w, h);
  static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                 {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};  // x0, y0, dx, dy
  uint64_t total = 0;
  for (const auto& p : pass) {
    const uint64_t pw = w > uint64_t(p[0]) ? (w - p[0] + p[2] - 1) / p[2] : 0;
    const uint64_t ph = h > uint64_t(p[1]) ? (h - p[1] + p[3] - 1) / p[3] : 0;
    total += rows(pw, ph);
  }
  return total;
}

struct Chunk {
  size_t offset;  // of its length field
  uint32_t length;
  const uint8_t* type;
  const uint8_t* data;
};

bool is(const Chunk& c, const char* type) { return std::memcmp(c.type, type, 4) == 0; }

}  // namespace

namespace {
// The chunks, each checked where it lies: inside the file, a valid name, its CRC; up to IEND.
std::vector<Chunk> png_chunks(const std::string& name, const uint8_t* data, size_t size) {
  std::vector<Chunk> chunks;
  size_t pos = 8;
  for (;;) {
    if (size - pos < 12)
      bad_png(name, "the file ends at byte " + std::to_string(size) + " without an IEND chunk (it was cut short)");
    Chunk c{pos, be32(data + pos), data + pos + 4, data + pos + 8};
    const std::string what = "chunk '" + type_text(c.type) + "' at byte offset " + std::to_string(pos);
    if (!is_letter(c.type[0]) || !is_letter(c.type[1]) || !is_letter(c.type[2]) || !is_letter(c.type[3]))
      bad_png(name, what + " does not have a PNG chunk name (four letters)");
    if (c.length > 0x7fffffffu)
      bad_png(name, what + " declares " + std::to_string(c.length) + " bytes, more than PNG allows (2^31 - 1)");
    if (c.length > size - pos - 12)
      bad_png(name, what + " declares " + std::to_string(c.length) + " bytes of data, but the file ends " +
                        std::to_string(size - pos - 8) + " bytes after its header (it was cut short)");
    const uint32_t stored = be32(c.data + c.length);
    const uint32_t computed = uint32_t(crc32(crc32(0, nullptr, 0), c.type, uInt(c.length + 4)));
    if (stored != computed)
      bad_png(name, what + " fails its CRC-32 check (stored " + hex32(stored) + ", computed " + hex32(computed) + ")");
    chunks.push_back(c);
    pos += 12 + size_t(c.length);
    if (is(c, "IEND")) return chunks;
  }
}

struct PngHeader {
  uint32_t w = 0, h = 0;
  int depth = 0, color = 0, channels = 0;
  bool interlaced = false;
};

// IHDR first, with a header stb_image and the size arithmetic below can trust.
PngHeader png_header(const std::string& name, const Chunk& ihdr) {
  if (!is(ihdr, "IHDR"))
    bad_png(name, "the first chunk is '" + type_text(ihdr.type) + "', not IHDR (an Apple CgBI PNG, or a damaged file)",
            "re-save it as a standard PNG, or replace or remove it");
  if (ihdr.length != 13) bad_png(name, "its IHDR chunk has " + std::to_string(ihdr.length) + " bytes, not 13");
  PngHeader hd;
  hd.w = be32(ihdr.data), hd.h = be32(ihdr.data + 4);
  hd.depth = ihdr.data[8], hd.color = ihdr.data[9];
  const uint32_t w = hd.w, h = hd.h;
  const int depth = hd.depth, color = hd.color;
  if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
    bad_png(name, "its IHDR declares " + std::to_string(w) + "x" + std::to_string(h) +
                      " pixels (each side must be 1 to 2^31 - 1)");
  bool depth_ok = false;
  switch (color) {
    case 0: hd.channels = 1; depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16; break;
    case 2: hd.channels = 3; depth_ok = depth == 8 || depth == 16; break;
    case 3: hd.channels = 1; depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8; break;
    case 4: hd.channels = 2; depth_ok = depth == 8 || depth == 16; break;
    case 6: hd.channels = 4; depth_ok = depth == 8 || depth == 16; break;
    default: break;
  }
  if (!hd.channels || !depth_ok)
    bad_png(name, "its IHDR declares colour type " + std::to_string(color) + " with bit depth " + std::to_string(depth) +
                      ", a combination PNG does not define");
  if (ihdr.data[10] != 0 || ihdr.data[11] != 0 || ihdr.data[12] > 1)
    bad_png(name, "its IHDR declares compression method " + std::to_string(ihdr.data[10]) + ", filter method " +
                      std::to_string(ihdr.data[11]) + " and interlace method " + std::to_string(ihdr.data[12]) +
                      " (PNG defines 0, 0 and 0 or 1)");
  check_size(name, "PNG", w, h);
  hd.interlaced = ihdr.data[12] == 1;
  return hd;
}

// The other chunks' order: one IHDR, PLTE before the image data, the IDAT chunks in one run.
void check_png_order(const std::string& name, const std::vector<Chunk>& chunks, int color) {
  bool plte = false, idat_seen = false, idat_ended = false;
  for (size_t i = 1; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    const std::string at = " at byte offset " + std::to_string(c.offset);
    if (is(c, "IHDR")) bad_png(name, "a second IHDR chunk" + at);
    if (is(c, "PLTE")) {
      if (idat_seen) bad_png(name, "its PLTE chunk" + at + " comes after the image data");
      plte = true;
    }
    if (is(c, "IDAT")) {
      if (idat_ended) bad_png(name, "the IDAT chunk" + at + " is separated from the IDAT chunks before it");
      if (color == 3 && !plte) bad_png(name, "a palette image whose image data comes before any PLTE chunk");
      idat_seen = true;
    } else if (idat_seen) {
      idat_ended = true;
    }
  }
  if (!idat_seen) bad_png(name, "it has no IDAT chunk, so no image data");
}

std::string too_much(uint64_t want, uint32_t w, uint32_t h) {
  return "its image data inflates to more than the " + std::to_string(want) + " bytes its IHDR implies (" +
         std::to_string(w) + "x" + std::to_string(h) + ")";
}

std::string corrupt(const z_stream& zs, int rc) {
  return std::string("its compressed image data is corrupt (zlib: ") + (zs.msg ? zs.msg : "error " + std::to_string(rc)) +
         ")";
}

bool bad_adler(const z_stream& zs, int rc) {
  return rc == Z_DATA_ERROR && zs.msg && std::strcmp(zs.msg, "incorrect data check") == 0;
}

const char* kBadAdler = "the Adler-32 checksum of its compressed image data does not match the data";

// The image data: one zlib stream across the IDAT chunks, inflated into a scratch buffer and
// counted, never stored. zlib checks the stream's header and its Adler-32 at the end. The bytes
// it gave, and *err set on damage.
uint64_t inflate_idat(const std::vector<Chunk>& chunks, uint64_t want, uint32_t w, uint32_t h, std::string* err) {
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) {
    *err = "zlib could not start inflating (out of memory?)";
    return 0;
  }
  uint8_t scratch[32768];
  uint64_t got = 0;
  bool ended = false;
  for (const Chunk& c : chunks) {
    if (!is(c, "IDAT") || ended || !err->empty()) continue;
    zs.next_in = const_cast<Bytef*>(c.data);
    zs.avail_in = uInt(c.length);
    while (zs.avail_in > 0 && err->empty()) {
      zs.next_out = scratch;
      zs.avail_out = sizeof scratch;
      const int rc = inflate(&zs, Z_NO_FLUSH);
      got += sizeof scratch - zs.avail_out;
      if (got > want) {
        *err = too_much(want, w, h);
      } else if (rc == Z_STREAM_END) {
        ended = true;  // bytes after the stream's end are ignored, as libpng does
        break;
      } else if (bad_adler(zs, rc)) {
        *err = kBadAdler;
      } else if (rc == Z_NEED_DICT) {
        *err = "its compressed image data asks for a preset dictionary, which PNG does not allow";
      } else if (rc != Z_OK) {  // Z_BUF_ERROR too: with input and room, no progress is damage
        *err = corrupt(zs, rc);
      }
    }
  }
  // inflate may hold output back until it is given room: drain it (bounded by want as above).
  while (err->empty() && !ended) {
    zs.next_out = scratch;
    zs.avail_out = sizeof scratch;
    const int rc = inflate(&zs, Z_FINISH);
    const size_t out = sizeof scratch - zs.avail_out;
    got += out;
    if (got > want)
      *err = too_much(want, w, h);
    else if (rc == Z_STREAM_END)
      ended = true;
    else if (bad_adler(zs, rc))
      *err = kBadAdler;
    else if ((rc == Z_OK || rc == Z_BUF_ERROR) && out == 0)  // no progress: the input ran out
      *err = "its compressed image data stops before the end of its zlib stream (the file was cut short, or an "
             "IDAT chunk is missing)";
    else if (rc != Z_OK && rc != Z_BUF_ERROR)
      *err = corrupt(zs, rc);
  }
  inflateEnd(&zs);
  return got;
}
}  // namespace

void check_png(const std::string& name, const uint8_t* data, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size < 8 || std::memcmp(data, kSignature, 8) != 0)
    bad_png(name, "its 8-byte signature is damaged (was it copied as text, turning line ends into others?)");
  const std::vector<Chunk> chunks = png_chunks(name, data, size);
  const PngHeader hd = png_header(name, chunks.front());
  check_png_order(name, chunks, hd.color);
  const uint64_t want = png_data_bytes(hd.w, hd.h, uint64_t(hd.channels) * uint64_t(hd.depth), hd.interlaced);
  std::string err;
  const uint64_t got = inflate_idat(chunks, want, hd.w, hd.h, &err);
  if (err.rfind("zlib could not start", 0) == 0) throw Error(name + ": " + err);
  if (!err.empty()) bad_png(name, err);
  if (got < want)
    bad_png(name, "its image data inflates to " + std::to_string(got) + " bytes, but its IHDR (" + std::to_string(hd.w) +
                      "x" + std::to_string(hd.h) + ") implies " + std::to_string(want));
}

bool is_jpeg(const uint8_t* data, size_t size) {
  // stb_image's test: 0xff, any more 0xff fill bytes, then SOI (0xd8).
  size_t i = 0;
  if (size < 2 || data[0] != 0xff) return false;
  while (i < size && data[i] == 0xff) ++i;
  return i < size && data[i] == 0xd8;
}

namespace {
// check_jpeg's walk over the markers from SOI to EOI, as stb_image finds them: 0xff (and fill
// bytes 0xff) then the marker byte; a segment's length covers itself; after a scan header (SOS)
// the entropy-coded data runs to the next 0xff that is followed by neither 0x00 (a stuffed byte)
// nor a restart marker (0xd0-0xd7).
class JpegWalk {
 public:
  JpegWalk(const std::string& name, const uint8_t* data, size_t size) : name_(name), data_(data), size_(size) {}
  void run();

 private:
  [[noreturn]] void bad(const std::string& what) const {
    throw Error(name_ + ": corrupt JPEG: " + what + "; " + kReplace);
  }
  unsigned be16(size_t p) const { return unsigned(data_[p]) << 8 | data_[p + 1]; }
  void huffman_tables(size_t seg, size_t end, const std::string& at);
  void frame_header(unsigned m, size_t seg, unsigned length, const std::string& at);
  void quantization_tables(size_t seg, size_t end, const std::string& at);
  void scan_header(size_t seg, unsigned length, const std::string& at);
  size_t skip_entropy_coded(size_t pos) const;

  const std::string& name_;
  const uint8_t* data_;
  size_t size_;
  bool sof_ = false, progressive_ = false;
  bool dc_[4] = {}, ac_[4] = {}, quant_[4] = {};  // the tables defined so far
  std::vector<std::pair<unsigned, unsigned>> components_;  // the frame's: (id, quantization table)
};

void JpegWalk::run() {
  size_t pos = 0;
  while (pos < size_ && data_[pos] == 0xff) ++pos;
  ++pos;  // SOI (is_jpeg checked it)
  for (;;) {
    if (pos >= size_) bad("the file ends at byte " + std::to_string(size_) + " without an EOI marker (it was cut short)");
    if (data_[pos] != 0xff) {
      if (!sof_) {  // stb_image skips padding between the segments before the frame header
        ++pos;
        continue;
      }
      bad("byte " + std::to_string(pos) + " should start a marker (0xff) but is " + std::to_string(data_[pos]));
    }
    while (pos < size_ && data_[pos] == 0xff) ++pos;
    if (pos >= size_) bad("the file ends inside a marker (it was cut short)");
    const unsigned m = data_[pos++];
    const std::string at = " at byte offset " + std::to_string(pos - 2);
    if (m == 0xd9) break;                                        // EOI
    if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) continue;          // no segment: TEM, RSTn, SOI
    if (size_ - pos < 2) bad("the file ends inside the marker segment" + at + " (it was cut short)");
    const unsigned length = be16(pos);
    if (length < 2) bad("the marker segment" + at + " declares a length of " + std::to_string(length));
    if (length > size_ - pos) bad("the marker segment" + at + " runs past the end of the file (it was cut short)");
    const size_t seg = pos + 2, end = pos + length;
    if (m == 0xc4) huffman_tables(seg, end, at);
    else if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) frame_header(m, seg, length, at);
    if (m == 0xdb) quantization_tables(seg, end, at);
    if (m == 0xda) scan_header(seg, length, at);
    pos = m == 0xda ? skip_entropy_coded(end) : end;
  }
  if (!sof_) bad("it has no frame header (SOF), so no image");
}

// DHT: tables of 1 + 16 count bytes + the codes. stb_image 2.27 reads each table's counts and
// writes that many codes into a table of 256 without checking (its sizes array, of 257, is
// overrun first): more than 256 is refused here, for every table stb_image would read.
void JpegWalk::huffman_tables(size_t seg, size_t end, const std::string& at) {
  for (size_t t = seg; t < end;) {
    if (size_ - t < 17) bad("the Huffman table" + at + " runs past the end of the file");
    const unsigned cls = data_[t] >> 4, id = data_[t] & 15;
    if (cls > 1 || id > 3) bad("the Huffman table" + at + " has class " + std::to_string(cls) + " and number " + std::to_string(id) + " (0-1 and 0-3)");
    (cls ? ac_ : dc_)[id] = true;
    unsigned n = 0;
    for (int i = 1; i <= 16; ++i) n += data_[t + size_t(i)];
    if (n > 256)
      bad("the Huffman table" + at + " declares " + std::to_string(n) + " codes, more than the 256 a table holds");
    t += 17 + n;
    if (t > end) bad("the Huffman table" + at + " runs past the end of its segment");
  }
}

// SOFn: the frame header, one per image; its dimensions are bounded before anything is decoded.
void JpegWalk::frame_header(unsigned m, size_t seg, unsigned length, const std::string& at) {
  if (sof_) bad("a second frame header (SOF)" + at);
  sof_ = true;
  if (length < 8 || length != 8 + 3 * unsigned(data_[seg + 5]))
    bad("the frame header" + at + " has a length that does not fit its components");
  progressive_ = m == 0xc2;
  for (unsigned c = 0; c < data_[seg + 5]; ++c) components_.emplace_back(data_[seg + 6 + 3 * c], data_[seg + 8 + 3 * c]);
  const int64_t h = be16(seg + 1), w = be16(seg + 3);
  check_size(name_, "JPEG", w, h);
  if (uint64_t(w) * uint64_t(h) / 1024 > size_)
    throw Error(name_ + ": the JPEG header declares " + std::to_string(w) + "x" + std::to_string(h) +
                " pixels, but the file has only " + std::to_string(size_) + " bytes, too few to hold them (every " +
                "8x8 block takes at least a bit); the file was cut short or is damaged: replace or remove it");
}

// DQT: tables of 1 + 64 or 128 bytes (8- or 16-bit entries).
void JpegWalk::quantization_tables(size_t seg, size_t end, const std::string& at) {
  for (size_t t = seg; t < end;) {
    const unsigned bits16 = data_[t] >> 4, id = data_[t] & 15;
    if (bits16 > 1 || id > 3) bad("the quantization table" + at + " has precision " + std::to_string(bits16) + " and number " + std::to_string(id) + " (0-1 and 0-3)");
    quant_[id] = true;
    t += bits16 ? 129 : 65;
    if (t > end) bad("the quantization table" + at + " runs past the end of its segment");
  }
}

// SOS: every table the scan decodes with must have been defined. stb_image 2.27 does not check,
// and decodes with whatever its uninitialised table holds (UBSan: index 18 out of bounds in
// stbi__jpeg_huff_decode). A progressive scan uses DC tables in its first DC pass only and AC
// tables in AC passes only, as stb_image does.
void JpegWalk::scan_header(size_t seg, unsigned length, const std::string& at) {
  if (!sof_) bad("a scan" + at + " before the frame header (SOF)");
  const unsigned ns = length > 2 ? data_[seg] : 0;
  if (ns < 1 || ns > 4 || length != 6 + 2 * ns) bad("the scan header" + at + " is malformed");
  const unsigned ss = data_[seg + 1 + 2 * ns], ah = data_[seg + 3 + 2 * ns] >> 4;
  const bool uses_dc = !progressive_ || (ss == 0 && ah == 0), uses_ac = !progressive_ || ss > 0;
  for (unsigned i = 0; i < ns; ++i) {
    const unsigned id = data_[seg + 1 + 2 * i], td = data_[seg + 2 + 2 * i] >> 4, ta = data_[seg + 2 + 2 * i] & 15;
    unsigned tq = 4;
    for (const auto& [cid, q] : components_)
      if (cid == id) tq = q;
    if (tq == 4 || tq > 3 || !quant_[tq])
      bad("the scan" + at + " uses component " + std::to_string(id) + ", which the frame lacks or whose quantization table no DQT defines");
    if (uses_dc && (td > 3 || !dc_[td]))
      bad("the scan" + at + " uses DC Huffman table " + std::to_string(td) + ", which no DHT before it defines");
    if (uses_ac && (ta > 3 || !ac_[ta]))
      bad("the scan" + at + " uses AC Huffman table " + std::to_string(ta) + ", which no DHT before it defines");
  }
}

// After a scan header: past the entropy-coded data, to the next marker.
size_t JpegWalk::skip_entropy_coded(size_t pos) const {
  while (pos + 1 < size_ && !(data_[pos] == 0xff && data_[pos + 1] != 0x00 && data_[pos + 1] != 0xff &&
                              !(data_[pos + 1] >= 0xd0 && data_[pos + 1] <= 0xd7)))
    ++pos;
  if (pos + 1 >= size_) bad("the file ends inside the image data, without an EOI marker (it was cut short)");
  return pos;
}
}  // namespace

void check_jpeg(const std::string& name, const uint8_t* data, size_t size) { JpegWalk(name, data, size).run(); }

}  // namespace loupe::data
