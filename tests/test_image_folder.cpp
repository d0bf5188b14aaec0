// The image-folder reader on PNG files written here byte for byte (a minimal PNG writer over
// zlib) and one hand-made baseline JPEG: class and file order, exact pixels for RGB and grey,
// stb_image's RGB-to-grey formula, the bilinear resize, and the errors. In a build without
// stb_image the tests skip, except the one that checks the error says how to get it.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/image_folder.h"

namespace fs = std::filesystem;
using loupe::data::ImageFolderData;
using loupe::data::load_image_folder;
using Bytes = std::vector<uint8_t>;

namespace {

#define SKIP_WITHOUT_STB() \
  if (!loupe::data::image_folders_supported()) GTEST_SKIP() << "loupe was built without stb_image (libstb-dev)"

void put32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

void chunk(Bytes& png, const char* type, const Bytes& data) {
  put32(png, uint32_t(data.size()));
  Bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  put32(png, uint32_t(crc32(0, body.data(), uInt(body.size()))));
}

// An 8-bit PNG: colour type 0 (grey), 2 (RGB), 4 (grey + alpha) or 6 (RGBA); `px` holds h rows
// of w pixels, interleaved. Every row gets filter 0 (none), and zlib deflates the lot.
Bytes png(int w, int h, int color_type, const Bytes& px) {
  const int c = color_type == 0 ? 1 : color_type == 2 ? 3 : color_type == 4 ? 2 : 4;
  EXPECT_EQ(px.size(), size_t(w) * h * c);
  Bytes raw;
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), px.begin() + size_t(y) * w * c, px.begin() + size_t(y + 1) * w * c);
  }
  Bytes z(compressBound(uLong(raw.size())));
  uLongf zn = uLongf(z.size());
  EXPECT_EQ(compress(z.data(), &zn, raw.data(), uLong(raw.size())), Z_OK);
  z.resize(zn);
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put32(ihdr, uint32_t(w));
  put32(ihdr, uint32_t(h));
  ihdr.insert(ihdr.end(), {8, uint8_t(color_type), 0, 0, 0});  // depth, colour, deflate, filter, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  return out;
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
  expect_error([&] { load_image_folder((root / "truncated").string(), 1, 28, 28); }, "cut.png", "cannot decode");

  for (int c = 0; c < 257; ++c) write_file(root / "many" / std::to_string(1000 + c) / "a.png", grey_png(1, 1, 1));
  expect_error([&] { load_image_folder((root / "many").string(), 1, 28, 28); }, "257", "at most 256");
}

TEST_F(ImageFolder, WithoutStbTheErrorSaysHowToGetIt) {
  if (loupe::data::image_folders_supported()) GTEST_SKIP() << "this build has stb_image";
  write_file(root / "c" / "a.png", grey_png(2, 2, 1));
  expect_error([&] { load_image_folder(root.string(), 1, 2, 2); }, "without stb_image", "libstb-dev");
}
