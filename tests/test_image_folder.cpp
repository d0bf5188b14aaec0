// The image-folder reader on PNG files written here byte for byte (tests/png_writer.h, a minimal
// PNG writer over zlib) and one hand-made baseline JPEG: class and file order, exact pixels for RGB and grey,
// stb_image's RGB-to-grey formula, the bilinear resize, and the errors. In a build without
// stb_image the tests skip, except the one that checks the error says how to get it.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "png_writer.h"
#include "test_util.h"
#include "run/data.h"
#include "skip.h"

namespace fs = std::filesystem;
using loupe::data::ImageFolderData;
using loupe::data::load_image_folder;
using loupe::test::Bytes;
using loupe::test::chunk;
using loupe::test::put32;

namespace {

#define SKIP_WITHOUT_STB() \
  if (!loupe::data::image_folders_supported()) GTEST_SKIP() << "loupe was built without stb_image (libstb-dev)"

// A PNG from its parts (tests/png_writer.h): IHDR's fields, the image data before compression
// (filter bytes included), an optional PLTE, the zlib level, IDAT chunks of at most `idat_size`
// bytes, and `edit_z` to change the zlib stream (say, its Adler-32) before it is cut into chunks.
Bytes png_raw(int w, int h, int depth, int color_type, int interlace, const Bytes& raw, const Bytes& plte = {},
              int level = Z_DEFAULT_COMPRESSION, size_t idat_size = SIZE_MAX,
              const std::function<void(Bytes&)>& edit_z = {}) {
  loupe::test::Png p;
  p.w = w, p.h = h, p.depth = depth, p.color = color_type, p.interlace = interlace;
  p.raw = raw;
  p.plte = plte;
  p.level = level;
  p.idat_size = idat_size;
  p.edit_z = edit_z;
  return loupe::test::make_png(p);
}

// An 8-bit PNG: colour type 0 (grey), 2 (RGB), 4 (grey + alpha) or 6 (RGBA); `px` holds h rows
// of w pixels, interleaved. Every row gets filter 0 (none), and zlib deflates the lot.
Bytes png(int w, int h, int color_type, const Bytes& px, int level = Z_DEFAULT_COMPRESSION,
          const std::function<void(Bytes&)>& edit_z = {}) {
  const int c = color_type == 0 ? 1 : color_type == 2 ? 3 : color_type == 4 ? 2 : 4;
  EXPECT_EQ(px.size(), size_t(w) * h * c);
  Bytes raw;
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), px.begin() + size_t(y) * w * c, px.begin() + size_t(y + 1) * w * c);
  }
  return png_raw(w, h, 8, color_type, 0, raw, {}, level, SIZE_MAX, edit_z);
}

Bytes grey_png(int w, int h, uint8_t v) { return png(w, h, 0, Bytes(size_t(w) * h, v)); }

// A 16x8 grey baseline JPEG made by hand: quantisation all 1, and each 8x8 block only a DC
// coefficient, so it decodes to a flat 160 on the left block and a flat 96 on the right one
// (DC = 8 (v - 128): +256, then a difference of -512). Huffman tables: DC categories 9 and 10
// with codes 00 and 01; AC only end-of-block, code 0.
Bytes tiny_jpeg() {
  Bytes j = {0xff, 0xd8,                                       // SOI
             0xff, 0xdb, 0x00, 0x43, 0x00};                    // DQT, table 0, 8-bit
  j.insert(j.end(), 64, 1);
  j.insert(j.end(), {0xff, 0xc0, 0x00, 0x0b, 8, 0x00, 8, 0x00, 16,  // SOF0: 8 bits, height 8, width 16
                     1, 1, 0x11, 0});                                // one component, 1x1, table 0
  j.insert(j.end(), {0xff, 0xc4, 0x00, 0x15, 0x00, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 10});
  j.insert(j.end(), {0xff, 0xc4, 0x00, 0x14, 0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00});
  j.insert(j.end(), {0xff, 0xda, 0x00, 0x08, 1, 1, 0x00, 0, 63, 0});  // SOS
  // 00 100000000 0 | 01 0111111111 0 | 1111111 (padding); the 0xff byte is stuffed with 0x00.
  j.insert(j.end(), {0x20, 0x05, 0xff, 0x00, 0x7f});
  j.insert(j.end(), {0xff, 0xd9});  // EOI
  return j;
}

void write_file(const fs::path& p, const Bytes& b) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A fresh folder under the system temp dir, removed afterwards.
class ImageFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    root = fs::temp_directory_path() /
           ("loupe_test_image_folder_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  fs::path root;
};

template <class F>
void expect_error(F f, const std::string& needle, const std::string& needle2 = "") {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << needle;
  } catch (const loupe::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message lacks '" << needle << "': " << msg;
    EXPECT_NE(msg.find(needle2), std::string::npos) << "message lacks '" << needle2 << "': " << msg;
  }
}

}  // namespace

TEST_F(ImageFolder, ClassesAndFilesInByteOrder) {
  SKIP_WITHOUT_STB();
  // Byte order: upper case before lower case, "10" before "2". Each image is flat, with a value
  // that says which one it is.
  write_file(root / "b_dog" / "2.png", grey_png(3, 2, 12));
  write_file(root / "b_dog" / "10.png", grey_png(3, 2, 11));
  write_file(root / "b_dog" / "1.PNG", grey_png(3, 2, 10));
  write_file(root / "b_dog" / "notes.txt", {'x'});
  write_file(root / "b_dog" / ".hidden.png", {'x'});
  write_file(root / "a_cat" / "x.png", grey_png(3, 2, 20));
  write_file(root / "Zebra" / "z.png", grey_png(3, 2, 30));
  write_file(root / "README.txt", {'x'});
  fs::create_directories(root / ".cache");
  const ImageFolderData d = load_image_folder(root.string(), 1, 2, 3);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"Zebra", "a_cat", "b_dog"}));
  EXPECT_EQ(loupe::data::image_folder_classes(root.string()), d.class_names);
  ASSERT_EQ(d.n, 5);
  EXPECT_EQ(d.labels, (Bytes{0, 1, 2, 2, 2}));
  const std::vector<std::string> names = {"z.png", "x.png", "1.PNG", "10.png", "2.png"};
  const Bytes values = {30, 20, 10, 11, 12};
  ASSERT_EQ(d.images.size(), size_t(5 * 6));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(fs::path(d.files[size_t(i)]).filename().string(), names[size_t(i)]);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(d.images[size_t(i * 6 + k)], values[size_t(i)]) << "image " << i;
  }
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.height, 2);
  EXPECT_EQ(d.width, 3);
  EXPECT_EQ(d.resized, 0);
}

// A 3-wide, 2-high RGB image with a different byte in every channel of every pixel.
Bytes rgb_pixels() {
  Bytes px;
  for (int k = 0; k < 6; ++k) px.insert(px.end(), {uint8_t(10 + k), uint8_t(100 + 7 * k), uint8_t(250 - 40 * k)});
  return px;
}

TEST_F(ImageFolder, RgbPixelsExactAsChwPlanes) {
  SKIP_WITHOUT_STB();
  const Bytes px = rgb_pixels();
  write_file(root / "c" / "a.png", png(3, 2, 2, px));
  const ImageFolderData d = load_image_folder(root.string(), 3, 2, 3);
  ASSERT_EQ(d.images.size(), size_t(18));
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 6; ++k) EXPECT_EQ(d.images[size_t(c * 6 + k)], px[size_t(k * 3 + c)]) << c << " " << k;
}

TEST_F(ImageFolder, RgbAsGreyUsesStbFormula) {
  SKIP_WITHOUT_STB();
  const Bytes px = rgb_pixels();
  write_file(root / "c" / "a.png", png(3, 2, 2, px));
  const ImageFolderData d = load_image_folder(root.string(), 1, 2, 3);
  ASSERT_EQ(d.images.size(), size_t(6));
  for (int k = 0; k < 6; ++k) {
    const int r = px[size_t(k * 3)], g = px[size_t(k * 3 + 1)], b = px[size_t(k * 3 + 2)];
    EXPECT_EQ(d.images[size_t(k)], (77 * r + 150 * g + 29 * b) >> 8) << k;
  }
}

TEST_F(ImageFolder, GreyAsRgbRepeatsAndAlphaIsDropped) {
  SKIP_WITHOUT_STB();
  write_file(root / "c" / "a.png", png(2, 1, 0, {7, 200}));
  write_file(root / "c" / "b.png", png(2, 1, 6, {1, 2, 3, 0, 4, 5, 6, 255}));  // RGBA
  const ImageFolderData d = load_image_folder(root.string(), 3, 1, 2);
  EXPECT_EQ(d.images, (Bytes{7, 200, 7, 200, 7, 200, 1, 4, 2, 5, 3, 6}));
}

TEST_F(ImageFolder, BilinearResizeWithPixelCentresAligned) {
  SKIP_WITHOUT_STB();
  write_file(root / "c" / "a.png", png(2, 2, 0, {0, 100, 200, 40}));
  const ImageFolderData d = load_image_folder(root.string(), 1, 4, 4);
  // Source positions (d + 0.5) / 2 - 0.5, clamped: 0, 0.25, 0.75, 1 along each axis (as PIL,
  // OpenCV and torch's align_corners=False), rounded to the nearest byte.
  const Bytes want = {0,   25,  75, 100,
                      50,  59,  76, 85,
                      150, 126, 79, 55,
                      200, 160, 80, 40};
  EXPECT_EQ(d.images, want);
  EXPECT_EQ(d.resized, 1);
}

TEST_F(ImageFolder, ConstantImageStaysConstantWhenResized) {
  SKIP_WITHOUT_STB();
  Bytes px;
  for (int k = 0; k < 7 * 5; ++k) px.insert(px.end(), {13, 200, 255});
  write_file(root / "c" / "a.png", png(7, 5, 2, px));
  for (auto [h, w] : {std::pair{28, 28}, std::pair{2, 3}, std::pair{5, 11}}) {
    const ImageFolderData d = load_image_folder(root.string(), 3, h, w);
    ASSERT_EQ(d.images.size(), size_t(3 * h * w));
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < h * w; ++k)
        ASSERT_EQ(d.images[size_t(c * h * w + k)], px[size_t(c)]) << h << "x" << w << " channel " << c;
  }
}

TEST_F(ImageFolder, ReadsABaselineJpeg) {
  SKIP_WITHOUT_STB();
  write_file(root / "c" / "a.JpEg", tiny_jpeg());
  for (int channels : {1, 3}) {
    const ImageFolderData d = load_image_folder(root.string(), channels, 8, 16);
    ASSERT_EQ(d.n, 1);
    ASSERT_EQ(d.images.size(), size_t(channels * 8 * 16));
    for (int c = 0; c < channels; ++c)
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 16; ++x)
          EXPECT_NEAR(d.images[size_t((c * 8 + y) * 16 + x)], x < 8 ? 160 : 96, 2) << c << " " << y << " " << x;
  }
}

TEST_F(ImageFolder, ErrorsNameThePath) {
  SKIP_WITHOUT_STB();
  const std::string missing = (root / "nowhere").string();
  expect_error([&] { load_image_folder(missing, 1, 28, 28); }, missing, "not found");

  write_file(root / "flat" / "a.png", grey_png(2, 2, 1));
  expect_error([&] { load_image_folder((root / "flat").string(), 1, 28, 28); }, "flat", "no class subfolders");

  write_file(root / "empty_class" / "cat" / "a.png", grey_png(2, 2, 1));
  write_file(root / "empty_class" / "dog" / "notes.txt", {'x'});
  expect_error([&] { load_image_folder((root / "empty_class").string(), 1, 28, 28); }, "dog", "without images");

  write_file(root / "corrupt" / "cat" / "a.png", grey_png(2, 2, 1));
  write_file(root / "corrupt" / "cat" / "broken.png", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  expect_error([&] { load_image_folder((root / "corrupt").string(), 1, 28, 28); }, "broken.png", "cannot decode");

  Bytes cut = grey_png(8, 8, 1);
  cut.resize(cut.size() / 2);
  write_file(root / "truncated" / "cat" / "cut.png", cut);
  expect_error([&] { load_image_folder((root / "truncated").string(), 1, 28, 28); }, "cut.png", "cut short");

  for (int c = 0; c < 257; ++c) write_file(root / "many" / std::to_string(1000 + c) / "a.png", grey_png(1, 1, 1));
  expect_error([&] { load_image_folder((root / "many").string(), 1, 28, 28); }, "257", "at most 256");
}

// ---- Integrity before decoding (docs/data.md): stb_image checks no CRC and no Adler-32, and
// allocates what a header declares. Every file below decoded, or was tried, on the old code.

// The folder holds one good image and `bad` under cat/, read as grey 4x4.
void expect_refused(const fs::path& root, const std::string& file, const Bytes& bad, const std::string& needle) {
  const fs::path dir = root / ("folder_of_" + std::to_string(file.size()) + "_" + std::to_string(file[0]));
  write_file(dir / "cat" / "a_good.png", grey_png(4, 4, 1));
  write_file(dir / "cat" / file, bad);
  expect_error([&] { load_image_folder(dir.string(), 1, 4, 4); }, file, needle);
}

Bytes ramp(size_t n) {
  Bytes px(n);
  for (size_t k = 0; k < n; ++k) px[k] = uint8_t(k * 7);
  return px;
}

TEST_F(ImageFolder, PngWithABadChunkCrcIsRefused) {
  SKIP_WITHOUT_STB();
  Bytes b = png(4, 4, 0, ramp(16));
  b[b.size() - 13] ^= 0x01;  // the last byte of the IDAT's CRC (IEND is the last 12 bytes)
  expect_refused(root, "crc.png", b, "fails its CRC-32 check");
  Bytes ihdr = png(4, 4, 0, ramp(16));
  ihdr[16 + 3] ^= 0x01;  // IHDR's width: 4 -> 5, its CRC left as it was
  expect_refused(root, "ihdr.png", ihdr, "chunk 'IHDR' at byte offset 8 fails its CRC-32 check");
}

TEST_F(ImageFolder, PngWithABadAdlerIsRefused) {
  SKIP_WITHOUT_STB();
  // Stored (level 0) deflate: the zlib header (2), a block header (5), then the image data as is.
  // One pixel changed with every chunk CRC recomputed: only the Adler-32 can tell.
  expect_refused(root, "pixel.png", png(4, 4, 0, ramp(16), 0, [](Bytes& z) { z[2 + 5 + 1] ^= 0x40; }),
                 "Adler-32 checksum");
  expect_refused(root, "adler.png", png(4, 4, 0, ramp(16), 6, [](Bytes& z) { z.back() ^= 0x01; }),
                 "Adler-32 checksum");
}

TEST_F(ImageFolder, PngImageDataMustMatchItsHeader) {
  SKIP_WITHOUT_STB();
  // IHDR says 4x2, the data holds 4 rows: stb_image decodes the first two and says nothing.
  Bytes raw;
  for (int y = 0; y < 4; ++y) raw.insert(raw.end(), {0, 1, 2, 3, 4});
  expect_refused(root, "long.png", png_raw(4, 2, 8, 0, 0, raw), "more than the 10 bytes its IHDR implies");
  expect_refused(root, "short.png", png_raw(4, 8, 8, 0, 0, raw), "inflates to 20 bytes, but its IHDR (4x8) implies 40");
  expect_refused(root, "cut_z.png", png(4, 4, 0, ramp(16), 6, [](Bytes& z) { z.resize(z.size() - 6); }),
                 "stops before the end of its zlib stream");
  Bytes no_iend = png(4, 4, 0, ramp(16));
  no_iend.resize(no_iend.size() - 12);
  expect_refused(root, "no_iend.png", no_iend, "without an IEND chunk");
  Bytes sig = png(4, 4, 0, ramp(16));
  sig[4] = '\n';  // "\r\n" -> "\n\n", as a text-mode copy does
  expect_refused(root, "sig.png", sig, "signature");
}

TEST_F(ImageFolder, HugePngHeaderIsRefusedBeforeDecoding) {
  SKIP_WITHOUT_STB();
  // 16000 x 16000 grey from a few bytes of data: stb_image allocated 256 MiB for it.
  expect_refused(root, "huge.png", png_raw(16000, 16000, 8, 0, 0, Bytes(16001, 0)), "at most 16384 a side");
  expect_refused(root, "wide.png", png_raw(20000, 1, 8, 0, 0, Bytes(20001, 0)), "20000x1 pixels, more than loupe decodes");
}

// docs/fuzzing.md, "Size caps": an image file is read only when its size (stat) is within 288 MiB,
// the most a PNG of the largest image loupe decodes takes; the reader read it whole first and
// refused it after. A sparse file of a PNG's first bytes, one byte over, is refused naming it; one
// of 1.5 GB ends with that error in a child allowed 1 GiB more address space.
TEST_F(ImageFolder, ImageFileOverItsCapIsRefusedBeforeReading) {
  SKIP_WITHOUT_STB();
  const fs::path dir = root / "set", huge = dir / "cat" / "huge.png";
  write_file(dir / "cat" / "a_good.png", grey_png(4, 4, 1));
  write_file(huge, grey_png(4, 4, 1));
  const std::string refused = " bytes, more than the 301,989,888 (288 MiB) loupe reads for one image (the largest "
                              "it decodes, 33,554,432 pixels of 16-bit RGBA, takes 256 MiB uncompressed): not an image; "
                              "replace or remove it";
  fs::resize_file(huge, (uint64_t(288) << 20) + 1);
  expect_error([&] { load_image_folder(dir.string(), 1, 4, 4); }, huge.string() + ": 301,989,889" + refused);
  fs::resize_file(huge, uint64_t(1536) << 20);
  // decode_image itself, not the folder's parallel loop: a forked child has none of the pool's threads.
  EXPECT_EQ(loupe::test::run_with_memory_limit([&] { loupe::data::decode_image(huge.string(), 1); }),
            "error: " + huge.string() + ": 1,610,612,736" + refused);
}

// A JPEG header declaring `h` x `w` around tiny_jpeg's data (which holds two 8x8 blocks).
Bytes jpeg_declaring(int h, int w) {
  Bytes j = tiny_jpeg();
  const size_t sof = 2 + 4 + 1 + 64;  // SOI, DQT header, its table
  EXPECT_EQ(j[sof], 0xff);
  EXPECT_EQ(j[sof + 1], 0xc0);
  j[sof + 5] = uint8_t(h >> 8), j[sof + 6] = uint8_t(h);
  j[sof + 7] = uint8_t(w >> 8), j[sof + 8] = uint8_t(w);
  return j;
}

TEST_F(ImageFolder, JpegDimensionsAreBoundedBeforeDecoding) {
  SKIP_WITHOUT_STB();
  // 4096 x 4096 from the bytes of two 8x8 blocks: stb_image allocated 16 MiB for it before failing on the data.
  expect_refused(root, "big.jpg", jpeg_declaring(4096, 4096), "too few to hold them");
  expect_refused(root, "tall.jpg", jpeg_declaring(30000, 16), "more than loupe decodes");
}

// A Huffman table of more than 256 codes: stb_image 2.27 wrote past its tables (found by
// fuzz_image under UBSan: index 257 out of bounds in stbi__build_huffman); a scan with a table no
// DHT defines; and a JPEG cut short.
TEST_F(ImageFolder, JpegStructureIsCheckedBeforeDecoding) {
  SKIP_WITHOUT_STB();
  Bytes j = tiny_jpeg();
  const size_t dht = 2 + 4 + 1 + 64 + 13;  // SOI, DQT, SOF0: the first DHT
  ASSERT_EQ(j[dht + 1], 0xc4);
  j[dht + 5 + 15] = 255;  // 255 codes of 16 bits in the DC table: 257 in all
  expect_refused(root, "dht.jpg", j, "declares 257 codes, more than the 256 a table holds");
  Bytes cut = tiny_jpeg();
  cut.resize(cut.size() - 2);  // no EOI
  expect_refused(root, "no_eoi.jpg", cut, "without an EOI marker");
  // The scan decodes with AC table 0, but the file defines AC table 1 only: stb_image 2.27 read its
  // uninitialised table (found by fuzz_image under UBSan: index 18 out of bounds in stbi__jpeg_huff_decode).
  Bytes undefined = tiny_jpeg();
  const size_t dht_ac = dht + 2 + 0x15;
  ASSERT_EQ(undefined[dht_ac + 1], 0xc4);
  ASSERT_EQ(undefined[dht_ac + 4], 0x10);
  undefined[dht_ac + 4] = 0x11;
  expect_refused(root, "undefined.jpg", undefined, "uses AC Huffman table 0, which no DHT before it defines");
  Bytes padded = tiny_jpeg();
  padded.insert(padded.begin() + 2 + 4 + 1 + 64, {0, 0, 0});  // padding after DQT, which stb_image skips
  write_file(root / "p" / "c" / "a.jpg", padded);
  EXPECT_EQ(load_image_folder((root / "p").string(), 1, 8, 16).n, 1);
}

// Adam7 interlacing of grey 8-bit pixels (h rows of w), each pass's rows with filter 0.
Bytes adam7(int w, int h, const Bytes& px) {
  static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                 {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  Bytes raw;
  for (const auto& p : pass) {
    if (p[0] >= w) continue;
    for (int y = p[1]; y < h; y += p[3]) {
      raw.push_back(0);
      for (int x = p[0]; x < w; x += p[2]) raw.push_back(px[size_t(y * w + x)]);
    }
  }
  return raw;
}

TEST_F(ImageFolder, ValidPngVariantsPassTheChecks) {
  SKIP_WITHOUT_STB();
  // Interlaced (passes with no columns or rows take no bytes), split over many IDAT chunks, with
  // an ancillary chunk and bytes after IEND: all valid, all read exactly.
  const Bytes px = ramp(5 * 3);
  Bytes inter = png_raw(5, 3, 8, 0, 1, adam7(5, 3, px), {}, 9, 3);
  Bytes text;
  chunk(text, "tEXt", {'k', 0, 'v'});
  inter.insert(inter.begin() + 33, text.begin(), text.end());  // after IHDR (8 + 25 bytes)
  inter.insert(inter.end(), {'x', 'y'});
  write_file(root / "i" / "c" / "a.png", inter);
  EXPECT_EQ(load_image_folder((root / "i").string(), 1, 3, 5).images, px);

  // 1-bit grey, 9 wide: two bytes a row, the bits of the first pixel highest.
  write_file(root / "b" / "c" / "a.png", png_raw(9, 2, 1, 0, 0, {0, 0b10100000, 0b10000000, 0, 0b01000000, 0}));
  EXPECT_EQ(load_image_folder((root / "b").string(), 1, 2, 9).images,
            (Bytes{255, 0, 255, 0, 0, 0, 0, 0, 255, 0, 255, 0, 0, 0, 0, 0, 0, 0}));

  // A palette of three colours at 2 bits a pixel, and 16-bit RGB (stb_image keeps the high byte).
  write_file(root / "p" / "c" / "a.png", png_raw(3, 1, 2, 3, 0, {0, 0b00011000}, {10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_EQ(load_image_folder((root / "p").string(), 3, 1, 3).images, (Bytes{10, 40, 70, 20, 50, 80, 30, 60, 90}));
  write_file(root / "w" / "c" / "a.png", png_raw(1, 1, 16, 2, 0, {0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}));
  EXPECT_EQ(load_image_folder((root / "w").string(), 3, 1, 1).images, (Bytes{0x12, 0x56, 0x9a}));
}

// An MNIST-format folder (the four IDX files) of n images of rows x cols.
void write_mnist_set(const fs::path& dir, uint32_t rows, uint32_t cols, uint32_t n = 20) {
  for (const char* set : {"train", "t10k"}) {
    Bytes images = {0, 0, 8, 3}, labels = {0, 0, 8, 1};
    put32(images, n), put32(images, rows), put32(images, cols);
    images.resize(images.size() + size_t(n) * rows * cols, 7);
    put32(labels, n);
    for (uint32_t i = 0; i < n; ++i) labels.push_back(uint8_t(i % 10));
    write_file(dir / (std::string(set) + "-images-idx3-ubyte"), images);
    write_file(dir / (std::string(set) + "-labels-idx1-ubyte"), labels);
  }
}

// MNIST-format files are not resized: images of another size than the models take are refused
// when the data is opened, naming the file, its size and the models' (a 10x10
// set failed in the first step with "matmul: shapes [128, 100] and [784, 512] do not chain").
TEST_F(ImageFolder, MnistFormatImagesOfTheWrongSizeAreRefusedWhenOpened) {
  write_mnist_set(root / "small", 10, 10);
  loupe::run::DataRequest r;
  r.dataset = "mnist";
  r.dir = (root / "small").string();
  try {
    loupe::run::load_data(r, loupe::kCPU);
    ADD_FAILURE() << "a 10x10 MNIST-format set was accepted for the 28x28 models";
  } catch (const loupe::Error& e) {
    const std::string msg = e.what();
    for (const std::string& needle : {(root / "small" / "train-images-idx3-ubyte").string(), std::string("10x10"),
                                      std::string("mnist_mlp and mnist_cnn take 28x28"), std::string("image folders")})
      EXPECT_NE(msg.find(needle), std::string::npos) << "message lacks '" << needle << "': " << msg;
  }
  // 28x28 loads, and so do image folders of any size (they are resized).
  write_mnist_set(root / "right", 28, 28);
  r.dir = (root / "right").string();
  EXPECT_EQ(loupe::run::load_data(r, loupe::kCPU).test.x.shape(), loupe::Shape({20, 28, 28}));
}

TEST_F(ImageFolder, WithoutStbTheErrorSaysHowToGetIt) {
  if (loupe::data::image_folders_supported()) LOUPE_SKIP_NOT_HERE << "this build has stb_image";
  write_file(root / "c" / "a.png", grey_png(2, 2, 1));
  expect_error([&] { load_image_folder(root.string(), 1, 2, 2); }, "without stb_image", "libstb-dev");
}
