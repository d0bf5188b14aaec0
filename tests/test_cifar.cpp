// The CIFAR-10 binary reader on files written byte for byte in the published layout (six batch
// files of 10,000 records: label byte, red plane, green plane, blue plane), every corruption we
// promise to catch, and the Keras-style augmentation of CifarDataset.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/cifar.h"
#include "data/cifar_dataset.h"

namespace fs = std::filesystem;
using loupe::data::CifarDataset;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr int kRecords = 10000, kRec = 3073, kImg = 3072;
const char* kBatches[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

// The pattern: image g (0..59,999 over the six files in order) has label g % 10 and, in channel
// c at pixel k = y * 32 + x, the byte g + 100 c + k (mod 256): every plane differs from the others.
uint8_t label_of(int64_t g) { return uint8_t(g % 10); }
uint8_t pixel_of(int64_t g, int c, int k) { return uint8_t(g + 100 * c + k); }

// One batch file as published: for each record the label, then R (1024), G (1024), B (1024).
Bytes batch_bytes(int file, int records = kRecords) {
  Bytes b(size_t(records) * kRec);
  for (int r = 0; r < records; ++r) {
    const int64_t g = int64_t(file) * kRecords + r;
    uint8_t* rec = b.data() + size_t(r) * kRec;
    rec[0] = label_of(g);
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 1024; ++k) rec[1 + c * 1024 + k] = pixel_of(g, c, k);
  }
  return b;
}

void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

template <class F>
void expect_error(F f, const std::string& file, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << needle;
  } catch (const loupe::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << "message does not name " << file << ": " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "message lacks '" << needle << "': " << msg;
  }
}

// One good set, written once (six 30 MB files) as ROOT/cifar-10-batches-bin; each test gets its
// own directory of symlinks to it, in which it replaces the file it corrupts.
class Cifar : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("loupe_cifar_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "good" / "cifar-10-batches-bin");
    for (int f = 0; f < 6; ++f) write_file(good() / kBatches[f], batch_bytes(f));
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static fs::path good() { return root_ / "good" / "cifar-10-batches-bin"; }

  // A fresh batch folder linking to the good files.
  fs::path copy_set() {
    fs::path d = root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(d);
    fs::create_directories(d);
    for (const char* f : kBatches) fs::create_symlink(good() / f, d / f);
    return d;
  }
  static void replace(const fs::path& d, const char* file, const Bytes& b) {
    fs::remove(d / file);
    write_file(d / file, b);
  }
  static fs::path root_;
};
fs::path Cifar::root_;

void check_split(const Bytes& images, const Bytes& labels, int64_t first_g, int64_t n) {
  ASSERT_EQ(int64_t(labels.size()), n);
  ASSERT_EQ(int64_t(images.size()), n * kImg);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(labels[i], label_of(first_g + i)) << "image " << i;
  for (int64_t i = 0; i < n; i += (i % kRecords == 0 || i % kRecords == kRecords - 1) ? 1 : 97) {
    const uint8_t* img = images.data() + i * kImg;
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 1024; k += 7)  // plane c at offset c * 1024, row-major
        ASSERT_EQ(img[c * 1024 + k], pixel_of(first_g + i, c, k)) << "image " << i << " c " << c;
  }
}

TEST_F(Cifar, ReadsPublishedLayoutFromParentOrBatchFolder) {
  for (const fs::path& dir : {good().parent_path(), good()}) {
    loupe::data::CifarData d = loupe::data::load_cifar10(dir.string());
    EXPECT_EQ(d.dir, good().string());
    EXPECT_EQ(d.n_train, 50000);
    EXPECT_EQ(d.n_test, 10000);
    check_split(d.train_images, d.train_labels, 0, 50000);
    check_split(d.test_images, d.test_labels, 50000, 10000);
    EXPECT_EQ(d.class_names, loupe::data::cifar10_class_names());  // no batches.meta.txt
  }
  // Image 12345 (file 2, record 2345): red, green, blue planes in order, pixel (y 5, x 7).
  loupe::data::CifarData d = loupe::data::load_cifar10(good().string());
  const uint8_t* img = d.train_images.data() + 12345 * kImg;
  EXPECT_EQ(img[0 * 1024 + 5 * 32 + 7], pixel_of(12345, 0, 5 * 32 + 7));
  EXPECT_EQ(img[1 * 1024 + 5 * 32 + 7], pixel_of(12345, 1, 5 * 32 + 7));
  EXPECT_EQ(img[2 * 1024 + 5 * 32 + 7], pixel_of(12345, 2, 5 * 32 + 7));
  EXPECT_EQ(d.train_labels[12345], 5);
}

TEST_F(Cifar, ClassNamesFromMeta) {
  fs::path d = copy_set();
  std::ofstream(d / "batches.meta.txt") << "plane\ncar\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\n"
                                           "truck\n\n\n";  // trailing blank lines, as published
  auto c = loupe::data::load_cifar10(d.string());
  ASSERT_EQ(c.class_names.size(), 10u);
  EXPECT_EQ(c.class_names[0], "plane");
  EXPECT_EQ(c.class_names[9], "truck");
  std::ofstream(d / "batches.meta.txt") << "a\nb\nc\n";
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "batches.meta.txt",
               "holds 3 class names, expected 10");
  // docs/fuzzing.md, "Size caps": a list of names is read only when its size (stat) is within
  // 64 KiB; the reader read a line of any length whole.
  fs::resize_file(d / "batches.meta.txt", (64 << 10) + 1);
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, (d / "batches.meta.txt").string(),
               ": 65,537 bytes, more than the 65,536 (64 KiB) loupe reads for a list of class names");
}

TEST_F(Cifar, TruncatedRecord) {
  fs::path d = copy_set();
  Bytes b = batch_bytes(2);
  b.resize(b.size() - 100);
  replace(d, "data_batch_3.bin", b);
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_3.bin",
               "truncated record");
}

TEST_F(Cifar, WrongRecordCount) {
  fs::path d = copy_set();
  replace(d, "data_batch_5.bin", batch_bytes(4, 9999));
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_5.bin",
               "holds 9999 records");
  replace(d, "data_batch_5.bin", batch_bytes(4, 10001));
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_5.bin",
               "holds 10001 records");
}

TEST_F(Cifar, LabelOutOfRange) {
  fs::path d = copy_set();
  Bytes b = batch_bytes(5);
  b[size_t(1234) * kRec] = 10;
  replace(d, "test_batch.bin", b);
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "test_batch.bin",
               "record 1234 (byte offset 3792082) has label 10");
}

// A FIFO in place of a batch file is refused by its kind before it is opened (an open would
// block), as is a directory.
TEST_F(Cifar, NotARegularFileIsRefusedBeforeOpening) {
  fs::path d = copy_set();
  fs::remove(d / "data_batch_4.bin");
  ASSERT_EQ(mkfifo((d / "data_batch_4.bin").c_str(), 0600), 0);
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_4.bin", "FIFO");
  fs::remove(d / "data_batch_4.bin");
  fs::create_directory(d / "data_batch_4.bin");
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_4.bin", "directory");
}

TEST_F(Cifar, MissingFiles) {
  fs::path d = copy_set();
  fs::remove(d / "test_batch.bin");
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "test_batch.bin",
               "data/fetch.sh cifar10");
  fs::remove(d / "data_batch_2.bin");
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_2.bin",
               "file not found");
  std::ofstream(d / "data_batch_2");  // the Python version's name
  expect_error([&] { loupe::data::load_cifar10(d.string()); }, "data_batch_2.bin",
               "Python version");
  expect_error([&] { loupe::data::load_cifar10((d / "nowhere").string()); }, "nowhere",
               "data/fetch.sh cifar10");
}

// ---- augmentation ----

// A test image whose every pixel differs: channel c, row y, column x holds 3c + 5y + 7x mod 256.
Bytes test_image() {
  Bytes b(kImg);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) b[c * 1024 + y * 32 + x] = uint8_t(3 * c + 5 * y + 7 * x);
  return b;
}
float px(const Bytes& b, int c, int y, int x) { return float(b[c * 1024 + y * 32 + x]) / 255.0f; }

TEST(CifarAugment, ShiftBoundsAndDistribution) {
  std::map<int, int> dx_count, dy_count;
  int flips = 0;
  const int n = 200000;
  for (uint64_t r = 0; r < uint64_t(n); ++r) {
    int dx, dy;
    bool flip;
    CifarDataset::draw_augmentation(r * 0x9E3779B97F4A7C15ull, &dx, &dy, &flip);
    ASSERT_LE(std::abs(dx), 3);
    ASSERT_LE(std::abs(dy), 3);
    ++dx_count[dx], ++dy_count[dy];
    flips += flip;
  }
  // Keras: t ~ U(-3.2, 3.2) rounded: 1/6.4 for -2..2, 0.7/6.4 for +-3 (see cifar_dataset.h).
  for (int v = -3; v <= 3; ++v) {
    const double p = (std::abs(v) == 3 ? 0.7 : 1.0) / 6.4;
    EXPECT_NEAR(dx_count[v] / double(n), p, 0.005) << "dx = " << v;
    EXPECT_NEAR(dy_count[v] / double(n), p, 0.005) << "dy = " << v;
  }
  EXPECT_NEAR(flips / double(n), 0.5, 0.005);
}

TEST(CifarAugment, IdentityIsPlainScaling) {
  Bytes src = test_image();
  std::vector<float> out(kImg);
  CifarDataset::augment_image(src.data(), out.data(), 0, 0, false);
  for (int k = 0; k < kImg; ++k) ASSERT_EQ(out[k], float(src[k]) * (1.0f / 255.0f));
}

TEST(CifarAugment, ShiftMovesPictureAndFillsWithNearestEdge) {
  Bytes src = test_image();
  std::vector<float> out(kImg);
  CifarDataset::augment_image(src.data(), out.data(), 2, -3, false);  // right 2, up 3
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const int sy = std::min(y + 3, 31), sx = std::max(x - 2, 0);
        ASSERT_FLOAT_EQ(out[c * 1024 + y * 32 + x], px(src, c, sy, sx)) << c << " " << y << " " << x;
      }
  // The new border: columns 0..2 repeat source column 0; rows 29..31 repeat source row 31.
  for (int y = 0; y < 29; ++y)
    for (int x : {0, 1, 2}) EXPECT_FLOAT_EQ(out[y * 32 + x], px(src, 0, y + 3, 0));
  for (int y : {29, 30, 31}) EXPECT_FLOAT_EQ(out[y * 32 + 10], px(src, 0, 31, 8));
}

TEST(CifarAugment, FlipMirrorsAndFlipOfFlipIsIdentity) {
  Bytes src = test_image();
  std::vector<float> once(kImg), twice(kImg);
  CifarDataset::augment_image(src.data(), once.data(), 0, 0, true);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        ASSERT_FLOAT_EQ(once[c * 1024 + y * 32 + x], px(src, c, y, 31 - x));
  Bytes flipped(kImg);
  for (int k = 0; k < kImg; ++k) flipped[k] = uint8_t(std::lround(once[k] * 255.0f));
  CifarDataset::augment_image(flipped.data(), twice.data(), 0, 0, true);
  for (int k = 0; k < kImg; ++k) ASSERT_EQ(twice[k], float(src[k]) * (1.0f / 255.0f));
  // Flip comes after the shift, as in Keras: flip(shift(img, dx)) at x reads column 31 - x - dx.
  CifarDataset::augment_image(src.data(), once.data(), 1, 0, true);
  EXPECT_FLOAT_EQ(once[0], px(src, 0, 0, 30));
  EXPECT_FLOAT_EQ(once[31], px(src, 0, 0, 0));
  EXPECT_FLOAT_EQ(once[30], px(src, 0, 0, 0));  // edge repeated
}

TEST(CifarAugment, DatasetDependsOnlyOnRng) {
  Bytes img = test_image(), imgs, labels = {3, 7};
  imgs.insert(imgs.end(), img.begin(), img.end());
  imgs.insert(imgs.end(), img.rbegin(), img.rend());
  CifarDataset plain(imgs, labels, false), aug(imgs, labels, true);
  EXPECT_EQ(aug.sample_shape(), (loupe::Shape{3, 32, 32}));
  EXPECT_EQ(aug.size(), 2);
  std::vector<float> a(kImg), b(kImg), e(kImg);
  int32_t y = -1;
  plain.get(0, a.data(), &y, 12345);
  EXPECT_EQ(y, 3);
  CifarDataset::augment_image(img.data(), e.data(), 0, 0, false);
  EXPECT_EQ(a, e);  // no augmentation: byte / 255, rng ignored
  int differing = 0;
  for (uint64_t r = 1; r <= 50; ++r) {
    aug.get(1, a.data(), &y, r);
    EXPECT_EQ(y, 7);
    aug.get(1, b.data(), &y, r);
    ASSERT_EQ(a, b) << "rng " << r;  // same rng, same output
    int dx, dy;
    bool flip;
    CifarDataset::draw_augmentation(r, &dx, &dy, &flip);
    CifarDataset::augment_image(imgs.data() + kImg, e.data(), dx, dy, flip);
    ASSERT_EQ(a, e) << "rng " << r;
    differing += (dx != 0 || dy != 0 || flip);
  }
  EXPECT_GT(differing, 40);
  expect_error([&] { CifarDataset(Bytes(100), Bytes(1), true); }, "CifarDataset",
               "do not make 1 images");
}

}  // namespace
