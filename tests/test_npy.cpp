// The .npy reader (data/npy.h): files written here byte for byte as numpy.lib.format writes them
// (versions 1.0, 2.0 and 3.0, every dtype loupe reads), read back exactly; and every refusal the
// reader promises, each in its sentence. No NumPy needed: the format is simple and published.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/npy.h"
#include "skip.h"
#include "test_util.h"

namespace fs = std::filesystem;
using loupe::data::NpyArray;
using loupe::data::NpyType;
using Bytes = std::vector<uint8_t>;

namespace {

// What np.save writes: magic, version, the header's length (little-endian, 2 bytes in 1.0, else
// 4), the dict padded with spaces so that the data starts at a multiple of 64, a newline, data.
Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t pre = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  for (size_t k = 0; k < pre - 8; ++k) b.push_back(uint8_t(h.size() >> (8 * k)));
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
}

template <class T>
Bytes raw(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

fs::path write(const std::string& name, const Bytes& b) {
  const fs::path p = loupe::test::temp_path(name);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return p;
}

// The message read_npy refuses `b` with ("" when it accepts it), and parse_npy must agree.
std::string refusal(const Bytes& b) {
  const fs::path p = write("npy_bad.npy", b);
  std::string from_file, from_bytes;
  try { loupe::data::read_npy(p.string()); } catch (const loupe::Error& e) { from_file = e.what(); }
  try { loupe::data::parse_npy(p.string(), b); } catch (const loupe::Error& e) { from_bytes = e.what(); }
  fs::remove(p);
  EXPECT_EQ(from_file.empty(), from_bytes.empty()) << from_file << " | " << from_bytes;
  return from_file;
}

}  // namespace

TEST(Npy, ReadsEveryTypeAndVersionExactly) {
  const std::vector<float> f = {0.5f, -1.25f, 3.0f, 1e-3f, 7.0f, -0.0f};
  const std::vector<double> d = {1.0 / 3, -2.0};
  const std::vector<int64_t> l = {-1, 1LL << 40, 7};
  const std::vector<int32_t> i = {0, -5, 9, 12};
  const std::vector<uint16_t> h = {0x3c00, 0xc000};  // float16 1.0, -2.0
  const Bytes u = {0, 127, 255};
  struct Case { std::string descr, shape; Bytes data; NpyType type; std::vector<int64_t> dims; };
  const std::vector<Case> cases = {
      {"<f4", "(2, 3)", raw(f), NpyType::F32, {2, 3}}, {"<f8", "(2,)", raw(d), NpyType::F64, {2}},
      {"<i8", "(3,)", raw(l), NpyType::I64, {3}},       {"<i4", "(2, 1, 2)", raw(i), NpyType::I32, {2, 1, 2}},
      {"<f2", "(2,)", raw(h), NpyType::F16, {2}},       {"|u1", "(3,)", u, NpyType::U8, {3}},
      {"<f8", "()", raw(std::vector<double>{2.5}), NpyType::F64, {}}};
  for (int major : {1, 2, 3})
    for (const Case& c : cases) {
      const fs::path p = write("npy_ok.npy", npy_bytes(dict(c.descr, c.shape), c.data, major));
      const NpyArray a = loupe::data::read_npy(p.string());
      EXPECT_EQ(a.type, c.type) << c.descr;
      EXPECT_EQ(a.shape, c.dims) << c.descr << " " << c.shape;
      EXPECT_EQ(a.bytes, c.data) << c.descr;
      EXPECT_EQ(a.numel() * int64_t(loupe::data::npy_type_size(a.type)), int64_t(a.bytes.size()));
      fs::remove(p);
    }
  // Keys in any order, double quotes, no trailing comma, Python 2's long suffix: all NumPy's.
  const Bytes other = npy_bytes("{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<i4\"}", raw(std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(refusal(other), "");
  // Zero elements: a shape with a 0, and no data.
  EXPECT_EQ(refusal(npy_bytes(dict("<f4", "(0, 5)"), {})), "");
}

TEST(Npy, RefusesWhatItCannotReadInOneSentence) {
  const Bytes four = raw(std::vector<float>{1, 2, 3, 4});
  const std::vector<std::pair<Bytes, std::string>> cases = {
      {{}, "not a .npy file"},
      {Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!'}, "not a .npy file"},
      {[&] { Bytes b = npy_bytes(dict("<f4", "(4,)"), four); b[6] = 4; return b; }(), "version 4.0; loupe reads 1.0, 2.0 and 3.0"},
      {[&] { Bytes b = npy_bytes(dict("<f4", "(4,)"), four); b[8] = 0xff; b[9] = 0xff; return b; }(), "truncated in the header"},
      {[&] { Bytes b = npy_bytes(dict("<f4", "(4,)"), four, 2); b[11] = 0x7f; return b; }(), "a header of"},
      {npy_bytes(dict(">f4", "(4,)"), four), "big-endian"},
      {npy_bytes(dict("<U4", "(4,)"), four), "dtype '<U4' is not one loupe reads"},
      {npy_bytes(dict("|O", "(4,)"), four), "dtype '|O' is not one loupe reads"},
      {npy_bytes(dict("<f4", "(4,)", "True"), four), "fortran_order is True"},
      {npy_bytes(dict("<f4", "(5,)"), four), "truncated: the shape needs 20 bytes of data, the file has 16"},
      {npy_bytes(dict("<f4", "(3,)"), four), "4 bytes after the 12 bytes of data"},
      {npy_bytes(dict("<f4", "(-4,)"), four), "expected a dimension"},
      {npy_bytes(dict("<f4", "(99999999999, 99999999999)"), four), "more than 2^62 bytes"},
      {npy_bytes(dict("<f4", "(99999999999999999999,)"), four), "a dimension too large"},
      {npy_bytes("{'descr': '<f4', 'shape': (4,), }", four), "missing one of descr, fortran_order and shape"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four), "a key other than"},
      {npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", four), "or one twice"},
      {npy_bytes("['descr']", four), "expected '{'"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}", four), "expected True or False"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [4]}", four), "expected a tuple"},
      {npy_bytes("{'descr': '<f4\\n', 'fortran_order': False, 'shape': (4,)}", four), "control character"},
      {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x", four), "end in spaces and one newline"},
  };
  for (const auto& [bytes, message] : cases) {
    const std::string got = refusal(bytes);
    EXPECT_NE(got.find(message), std::string::npos) << "want '" << message << "', got '" << got << "'";
    EXPECT_NE(got.find("npy_bad.npy"), std::string::npos) << got;  // names the file
  }
  EXPECT_NE(refusal(Bytes{}).find("not a .npy file"), std::string::npos);
  try {
    loupe::data::read_npy("/nonexistent/loupe.npy");
    ADD_FAILURE() << "a missing file was read";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read '/nonexistent/loupe.npy'"), std::string::npos) << e.what();
  }
}

namespace {
// The four files of a NumPy image data set in a fresh folder.
fs::path npy_set(const std::string& name, const Bytes& xtr, const Bytes& ytr, const Bytes& xte, const Bytes& yte) {
  const fs::path dir = loupe::test::temp_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::pair<const char*, const Bytes*> files[] = {
      {"x_train.npy", &xtr}, {"y_train.npy", &ytr}, {"x_test.npy", &xte}, {"y_test.npy", &yte}};
  for (const auto& [f, b] : files)
    std::ofstream(dir / f, std::ios::binary).write(reinterpret_cast<const char*>(b->data()), std::streamsize(b->size()));
  return dir;
}

std::string load_error(const fs::path& dir, const std::vector<int64_t>& sample) {
  try {
    loupe::data::load_npy_images(dir.string(), sample, 10);
  } catch (const loupe::Error& e) {
    return e.what();
  }
  return "";
}

// The sentence has_npy_arrays refuses `path` with ("" when it does not throw).
std::string arrays_refusal(const fs::path& path) {
  try {
    loupe::data::has_npy_arrays(path.string());
  } catch (const loupe::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Keras's layouts: [N, H, W] grey, [N, H, W, C] channels-last (transposed once, pixel for pixel),
// [N, C, H, W]; labels [N], [N, 1] or one-hot.
TEST(NpyImages, KerasLayoutsBecomeChannelsFirst) {
  Bytes hwc(2 * 2 * 3 * 3);  // 2 images, 2x3 pixels, 3 channels: value = 100 i + 10 c + pixel
  for (int i = 0; i < 2; ++i)
    for (int p = 0; p < 6; ++p)
      for (int c = 0; c < 3; ++c) hwc[size_t((i * 6 + p) * 3 + c)] = uint8_t(100 * i + 10 * c + p);
  const Bytes labels = raw(std::vector<int64_t>{3, 9});
  const Bytes one_hot = raw(std::vector<float>{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const Bytes column = raw(std::vector<int32_t>{4, 5});
  const fs::path dir = npy_set("npy_set_hwc", npy_bytes(dict("|u1", "(2, 2, 3, 3)"), hwc), npy_bytes(dict("<i8", "(2,)"), labels),
                               npy_bytes(dict("|u1", "(2, 2, 3, 3)"), hwc), npy_bytes(dict("<f4", "(2, 10)"), one_hot));
  ASSERT_TRUE(loupe::data::has_npy_arrays(dir.string()));
  const loupe::data::NpyImages a = loupe::data::load_npy_images(dir.string(), {3, 2, 3}, 10);
  EXPECT_EQ(a.n_train, 2);
  EXPECT_NE(a.layout.find("channels-last"), std::string::npos) << a.layout;
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 6; ++p) ASSERT_EQ(a.train_images[size_t((i * 3 + c) * 6 + p)], 100 * i + 10 * c + p);
  EXPECT_EQ(a.train_labels, (Bytes{3, 9}));
  EXPECT_EQ(a.test_labels, (Bytes{7, 0}));  // from one-hot
  fs::remove_all(dir);
  const Bytes grey(2 * 4, 7);
  const fs::path g = npy_set("npy_set_grey", npy_bytes(dict("|u1", "(2, 2, 2)"), grey), npy_bytes(dict("<i4", "(2, 1)"), column),
                             npy_bytes(dict("|u1", "(2, 1, 2, 2)"), grey), npy_bytes(dict("<i4", "(2,)"), column));
  const loupe::data::NpyImages b = loupe::data::load_npy_images(g.string(), {2, 2}, 10);
  EXPECT_EQ(b.train_images, grey);
  EXPECT_EQ(b.train_labels, (Bytes{4, 5}));
  EXPECT_EQ(b.test_images, grey);
  fs::remove_all(g);
}

TEST(NpyImages, RefusesWhatTheModelCannotTakeByName) {
  const Bytes img(2 * 4, 1), lab = raw(std::vector<int64_t>{1, 2});
  const Bytes x = npy_bytes(dict("|u1", "(2, 2, 2)"), img), y = npy_bytes(dict("<i8", "(2,)"), lab);
  struct Case { Bytes xtr, ytr; std::string message; };
  const std::vector<Case> cases = {
      {npy_bytes(dict("<f4", "(2, 2, 2)"), Bytes(32, 0)), y, "x_train.npy: images of dtype float32; loupe reads uint8"},
      {npy_bytes(dict("|u1", "(2, 4)"), img), y, "x_train.npy: images of shape [2, 4]; the model takes [N, 2, 2]"},
      {x, npy_bytes(dict("<i8", "(3,)"), raw(std::vector<int64_t>{1, 2, 3})), "y_train.npy: labels of shape [3] for 2 images"},
      {x, npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{1, 10})), "row 1 holds label 10; labels must be whole numbers from 0 to 9"},
      {x, npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{-1, 1})), "row 0 holds label -1; labels must be whole numbers from 0 to 9"},
      {x, npy_bytes(dict("<f8", "(2,)"), raw(std::vector<double>{0.5, 1})), "row 0 holds label 0.5; labels must be whole numbers"},
      {x, npy_bytes(dict("<f4", "(2, 10)"), Bytes(80, 0)), "row 0 is not one-hot"},
  };
  for (const Case& c : cases) {
    const fs::path dir = npy_set("npy_set_bad", c.xtr, c.ytr, x, y);
    const std::string got = load_error(dir, {2, 2});
    EXPECT_NE(got.find(c.message), std::string::npos) << "want '" << c.message << "', got '" << got << "'";
    fs::remove_all(dir);
  }
  const fs::path part = npy_set("npy_set_part", x, y, x, y);
  fs::remove(part / "y_test.npy");
  const std::string three = arrays_refusal(part);
  EXPECT_NE(three.find("has NumPy arrays but not y_test.npy"), std::string::npos) << "three of the four files: '" << three << "'";
  fs::remove_all(part);
  EXPECT_FALSE(loupe::data::has_npy_arrays(loupe::test::temp_path("npy_no_such_dir").string()));
}

// One-hot labels [N, classes]: each row exactly one 1 and the rest 0, in any dtype. A fraction, a
// negative value, NaN, two ones or none is refused with the row it is in (here the second: the
// first row is good), never read as a class; good rows give their 1's column.
TEST(NpyImages, OneHotRowsAreExactlyOneOneTheRestZero) {
  const Bytes img(2 * 4, 1);
  const Bytes x = npy_bytes(dict("|u1", "(2, 2, 2)"), img), y = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 1}));
  auto load = [&](const Bytes& labels) {
    const fs::path dir = npy_set("npy_set_one_hot", x, labels, x, y);
    std::string error;
    Bytes got;
    try {
      got = loupe::data::load_npy_images(dir.string(), {2, 2}, 3).train_labels;
    } catch (const loupe::Error& e) {
      error = e.what();
    }
    fs::remove_all(dir);
    return std::make_pair(got, error);
  };
  const float nan = std::nanf("");
  const std::vector<std::vector<float>> bad = {
      {0, 0.5f, 1}, {0, -1, 1}, {nan, 0, 1}, {0, 1, 1}, {0, 0, 0}, {1, 1, 1}, {0, 0, 2}, {0, 1, 0.5f}};
  for (const std::vector<float>& row : bad) {
    std::vector<float> rows = {0, 0, 1};
    rows.insert(rows.end(), row.begin(), row.end());
    const auto [labels, error] = load(npy_bytes(dict("<f4", "(2, 3)"), raw(rows)));
    EXPECT_NE(error.find("y_train.npy: row 1 is not one-hot (exactly one 1, the rest 0)"), std::string::npos)
        << "[" << row[0] << ", " << row[1] << ", " << row[2] << "]: '" << error << "'";
    EXPECT_TRUE(labels.empty());
  }
  const auto [f32, f32_error] = load(npy_bytes(dict("<f4", "(2, 3)"), raw(std::vector<float>{0, 0, 1, 0, 1, 0})));
  EXPECT_EQ(f32, (Bytes{2, 1})) << f32_error;
  const auto [u8, u8_error] = load(npy_bytes(dict("|u1", "(2, 3)"), Bytes{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(u8, (Bytes{0, 2})) << u8_error;
  const auto [i64, i64_error] = load(npy_bytes(dict("<i8", "(2, 3)"), raw(std::vector<int64_t>{0, 1, 0, 0, -1, 1})));
  EXPECT_NE(i64_error.find("row 1 is not one-hot"), std::string::npos) << i64_error;
}

// The user's path: `loupe train mnist_mlp --data DIR` on Keras-layout arrays ([N, 28, 28, 1] uint8,
// one-hot test labels) trains, and the data line says what it read.
TEST(NpyImages, TheCommandTrainsOnThem) {
  Bytes x_train(256 * 28 * 28), x_test(64 * 28 * 28);
  for (size_t k = 0; k < x_train.size(); ++k) x_train[k] = uint8_t(k * 7);
  for (size_t k = 0; k < x_test.size(); ++k) x_test[k] = uint8_t(k * 3);
  std::vector<int64_t> y_train(256);
  for (size_t k = 0; k < y_train.size(); ++k) y_train[k] = int64_t(k % 10);
  std::vector<float> y_test(64 * 10, 0.0f);
  for (size_t k = 0; k < 64; ++k) y_test[k * 10 + k % 10] = 1.0f;
  const fs::path dir = npy_set("npy_set_cli", npy_bytes(dict("|u1", "(256, 28, 28, 1)"), x_train),
                               npy_bytes(dict("<i8", "(256,)"), raw(y_train)), npy_bytes(dict("|u1", "(64, 28, 28, 1)"), x_test),
                               npy_bytes(dict("<f4", "(64, 10)"), raw(y_test)));
  auto [rc, out] = loupe::test::run_command(std::string(LOUPE_CLI) + " train mnist_mlp --device cpu --plain --no-nvml "
                                            "--epochs 1 --max-steps 2 --data " + dir.string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("data    NumPy arrays from " + dir.string() + " (256 train, 64 test); images [N, H, W, C] "
                     "(channels-last, transposed once), uint8"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 1/1"), std::string::npos) << out;
  fs::remove_all(dir);
}

// --val-split: a folder with x_train.npy and y_train.npy alone holds out their last F (as Keras's
// validation_split) as the test set; it is refused without the split, and the split is refused
// where the test files are there.
TEST(NpyImages, ValSplitHoldsOutTheLastPart) {
  Bytes images(8 * 4);
  for (size_t k = 0; k < images.size(); ++k) images[k] = uint8_t(k);
  const Bytes labels = raw(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  const Bytes x = npy_bytes(dict("|u1", "(8, 2, 2)"), images), y = npy_bytes(dict("<i8", "(8,)"), labels);
  const fs::path dir = npy_set("npy_set_split", x, y, x, y);
  fs::remove(dir / "x_test.npy");
  fs::remove(dir / "y_test.npy");
  EXPECT_TRUE(loupe::data::has_npy_arrays(dir.string()));
  EXPECT_NE(load_error(dir, {2, 2}).find("give --val-split F to hold out the last F"), std::string::npos);
  const loupe::data::NpyImages a = loupe::data::load_npy_images(dir.string(), {2, 2}, 10, 0.25);
  EXPECT_TRUE(a.split);
  EXPECT_EQ(a.n_train, 6);
  EXPECT_EQ(a.n_test, 2);
  EXPECT_EQ(a.train_labels, (Bytes{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(a.test_labels, (Bytes{6, 7}));
  EXPECT_EQ(a.test_images, Bytes(images.begin() + 24, images.end()));
  EXPECT_EQ(a.train_images, Bytes(images.begin(), images.begin() + 24));
  EXPECT_EQ(loupe::data::load_npy_images(dir.string(), {2, 2}, 10, 0.01).n_test, 1);  // at least one
  fs::remove_all(dir);
  const fs::path full = npy_set("npy_set_full", x, y, x, y);
  try {
    loupe::data::load_npy_images(full.string(), {2, 2}, 10, 0.1);
    ADD_FAILURE() << "--val-split beside the test files was taken";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("so --val-split has nothing to do"), std::string::npos) << e.what();
  }
  fs::remove_all(full);
}

// A model file's arrays (load_npy_features): any dtype at the model's input shape, as float32 —
// uint8 scaled by 1/255 unless they are token ids, float16 decoded, ids kept whole; what does not
// fit the model refused by name.
TEST(NpyFeatures, AnyDtypeAtTheModelsInputShape) {
  const Bytes lab = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 2}));
  const Bytes f16 = npy_bytes(dict("<f2", "(2, 3)"), raw(std::vector<uint16_t>{0x3c00, 0xc000, 0x3800, 0x0001, 0x7bff, 0}));
  fs::path dir = npy_set("npy_feat_f16", f16, lab, f16, lab);
  loupe::data::NpyFeatures a = loupe::data::load_npy_features(dir.string(), {3}, 3, false);
  EXPECT_EQ(a.x_type, "float16");
  EXPECT_EQ(a.train_x, (std::vector<float>{1.0f, -2.0f, 0.5f, 5.960464477539063e-08f, 65504.0f, 0.0f}));
  EXPECT_EQ(a.train_labels, (Bytes{0, 2}));
  fs::remove_all(dir);
  const Bytes u8 = npy_bytes(dict("|u1", "(2, 2, 1)"), Bytes{0, 51, 255, 7});
  dir = npy_set("npy_feat_u8", u8, lab, u8, lab);
  EXPECT_EQ(loupe::data::load_npy_features(dir.string(), {2, 1}, 3, false).train_x,
            (std::vector<float>{0.0f, 0.2f, 1.0f, float(7 / 255.0)}));
  EXPECT_EQ(loupe::data::load_npy_features(dir.string(), {2, 1}, 3, true).train_x, (std::vector<float>{0, 51, 255, 7}));
  auto error = [&](const std::vector<int64_t>& sample, int classes, bool ids) {
    try {
      loupe::data::load_npy_features(dir.string(), sample, classes, ids);
    } catch (const loupe::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error({2}, 3, false).find("arrays of shape [2, 2, 1]; the model takes [N, 2]"), std::string::npos);
  EXPECT_NE(error({2, 1}, 2, false).find("row 1 holds label 2; labels must be whole numbers from 0 to 1"), std::string::npos);
  fs::remove_all(dir);
  const Bytes frac = npy_bytes(dict("<f4", "(2, 2)"), raw(std::vector<float>{1, 2.5f, 3, 4}));
  dir = npy_set("npy_feat_ids", frac, lab, frac, lab);
  EXPECT_NE(error({2}, 3, true).find("row 0 holds 2.5, not a token id"), std::string::npos);
  fs::remove_all(dir);
}

namespace {
// The last epoch line's test loss and test accuracy (in %), as printed; NaN where missing.
std::pair<double, double> last_test_figures(const std::string& out) {
  const size_t loss = out.rfind("  test loss "), acc = out.rfind("  test acc ");
  if (loss == std::string::npos || acc == std::string::npos || acc < loss) return {std::nan(""), std::nan("")};
  try {
    return {std::stod(out.substr(loss + 12)), std::stod(out.substr(acc + 11))};
  } catch (const std::exception&) {
    return {std::nan(""), std::nan("")};
  }
}
}  // namespace

// The user's path with their own model: `loupe train model.json --data DIR` on arrays of its
// input's shape (float32 features, three classes, a test set held out by --val-split) trains and
// says what it read. The class is which of three ranges the first feature falls in, which the model
// learns: the printed test loss is finite, the test accuracy well above chance (38%, the largest
// class) and a whole number of the 60 held-out samples, and both are those of the same split given
// as test files (the held-out part is what was evaluated).
TEST(NpyFeatures, AModelFileTrainsOnItsOwnArrays) {
  const int64_t n = 300, held = 60;
  std::vector<float> x(size_t(n * 5));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < 5; ++k) x[size_t(i * 5 + k)] = float((i * 31 + k * 17) % 13) / 13.0f;
    y[size_t(i)] = (i * 31) % 13 < 4 ? 0 : (i * 31) % 13 < 9 ? 1 : 2;
  }
  const Bytes xb = npy_bytes(dict("<f4", "(300, 5)"), raw(x)), yb = npy_bytes(dict("<i8", "(300,)"), raw(y));
  const fs::path dir = npy_set("npy_feat_cli", xb, yb, xb, yb);
  fs::remove(dir / "x_test.npy");
  fs::remove(dir / "y_test.npy");
  const fs::path model = dir / "model.json";
  std::ofstream(model) << R"({"class_name": "Sequential", "config": [{"class_name": "Dense", "config": {"name": "h",
    "units": 8, "activation": "relu", "batch_input_shape": [null, 5]}}, {"class_name": "Dense", "config": {"name": "out",
    "units": 3, "activation": "softmax"}}], "keras_version": "2.2.4"})";
  const std::string train = std::string(LOUPE_CLI) + " train " + model.string() +
                            " --device cpu --plain --no-nvml --epochs 20 --lr 0.01 --data ";
  auto [rc, out] = loupe::test::run_command(train + dir.string() + " --val-split 0.2");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("data    NumPy arrays from " + dir.string() + " (240 train, 60 held out by --val-split; x float32 "
                     "[N, 5])"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 20/20"), std::string::npos) << out;
  const auto [loss, acc] = last_test_figures(out);
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << out;
  EXPECT_TRUE(acc >= 60 && acc <= 100) << "not learned (chance is 38%): " << out;
  EXPECT_NEAR(acc * held / 100, std::round(acc * held / 100), 0.01) << "not a whole number of 60 samples: " << out;
  // The same split as files: the first 240 samples train, the last 60 are the test set.
  const size_t cut = size_t(n - held);
  const std::vector<float> x_train(x.begin(), x.begin() + long(cut * 5)), x_test(x.begin() + long(cut * 5), x.end());
  const std::vector<int64_t> y_train(y.begin(), y.begin() + long(cut)), y_test(y.begin() + long(cut), y.end());
  const fs::path files = npy_set("npy_feat_cli_files", npy_bytes(dict("<f4", "(240, 5)"), raw(x_train)),
                                 npy_bytes(dict("<i8", "(240,)"), raw(y_train)), npy_bytes(dict("<f4", "(60, 5)"), raw(x_test)),
                                 npy_bytes(dict("<i8", "(60,)"), raw(y_test)));
  auto [rc_files, out_files] = loupe::test::run_command(train + files.string());
  EXPECT_EQ(rc_files, 0) << out_files;
  EXPECT_NE(out_files.find("(240 train, 60 test; x float32 [N, 5])"), std::string::npos) << out_files;
  const auto [loss_files, acc_files] = last_test_figures(out_files);
  EXPECT_EQ(loss, loss_files) << "--val-split evaluated other samples than its last 60:\n" << out << "\n" << out_files;
  EXPECT_EQ(acc, acc_files);
  fs::remove_all(files);
  // Without arrays the model's data set is none of the reference ones: said, with what to give.
  auto [rc2, out2] = loupe::test::run_command(std::string(LOUPE_CLI) + " train " + model.string() + " --device cpu");
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("give its data as --data DIR with x_train.npy [N, 5]"), std::string::npos) << out2;
  // --synthetic (what loupe bench uses): random arrays of its input, said to mean only the speed.
  auto [rc3, out3] = loupe::test::run_command(std::string(LOUPE_CLI) + " train " + model.string() +
                                              " --device cpu --plain --no-nvml --epochs 1 --max-steps 5 --synthetic");
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("data    synthetic arrays of the model's input [N, 5] (16384 train, 2048 test; random values, "
                      "labels: only the speed means anything)"), std::string::npos) << out3;
  fs::remove_all(dir);
}

// A model whose last layer gives logits (Dense without an activation) and a file that names no
// loss: refused until --loss names one, which then trains it (the header says where it came from).
TEST(NpyFeatures, ALossFromTheCommandLineForALinearLastLayer) {
  const int64_t n = 200;
  std::vector<float> x(size_t(n * 4));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < 4; ++k) x[size_t(i * 4 + k)] = float((i * 7 + k * 3) % 11) / 11.0f;
    y[size_t(i)] = x[size_t(i * 4)] > 0.5f;
  }
  const Bytes xb = npy_bytes(dict("<f4", "(200, 4)"), raw(x)), yb = npy_bytes(dict("<i8", "(200,)"), raw(y));
  const fs::path dir = npy_set("npy_loss_cli", xb, yb, xb, yb);
  auto model = [&](int units) {
    const fs::path m = dir / ("logits" + std::to_string(units) + ".json");
    std::ofstream(m) << R"({"class_name": "Sequential", "config": [{"class_name": "Dense", "config": {"name": "out",
      "units": )" << units << R"(, "batch_input_shape": [null, 4]}}], "keras_version": "2.2.4"})";
    return m.string();
  };
  const std::string train = std::string(LOUPE_CLI) + " train ", flags = " --device cpu --plain --no-nvml --epochs 1 --data " + dir.string();
  auto [rc, out] = loupe::test::run_command(train + model(2) + flags);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("the last layer has no softmax or sigmoid and the file names no loss: give --loss "
                     "categorical_crossentropy or binary_crossentropy (on the outputs as logits)"), std::string::npos) << out;
  auto [rc2, out2] = loupe::test::run_command(train + model(2) + flags + " --loss sparse_categorical_crossentropy");
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("(the loss from --loss sparse_categorical_crossentropy; the file has no compile_config"), std::string::npos) << out2;
  auto [rc3, out3] = loupe::test::run_command(train + model(1) + flags + " --loss binary_crossentropy");
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("epoch 1/1"), std::string::npos) << out3;
  auto [rc4, out4] = loupe::test::run_command(train + model(2) + flags + " --loss binary_crossentropy");
  EXPECT_EQ(rc4, 1) << out4;
  EXPECT_NE(out4.find("--loss binary_crossentropy over 2 outputs; binary_crossentropy trains one"), std::string::npos) << out4;
  auto [rc5, out5] = loupe::test::run_command(train + model(2) + flags + " --loss hinge");
  EXPECT_EQ(rc5, 2) << out5;  // a usage error, before any work
  EXPECT_NE(out5.find("--loss 'hinge': loupe trains categorical_crossentropy, sparse_categorical_crossentropy, "
                      "binary_crossentropy or mean_squared_error"), std::string::npos) << out5;
  fs::remove_all(dir);
}

// A regression (docs/keras.md, "What is read"): a linear last layer trained with --loss mse on
// float targets of its two outputs, held out by --val-split; the data line says float targets and
// resident, the epoch line and the records have no accuracy, and the run's end names the test loss.
// Targets that do not fit the outputs, or that are not finite, are refused by file and place.
TEST(NpyFeatures, ARegressionTrainsOnFloatTargets) {
  const int64_t n = 400;
  std::vector<float> x(size_t(n * 3));
  std::vector<double> y(static_cast<size_t>(n * 2)), bad(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < 3; ++k) x[size_t(i * 3 + k)] = float((i * 7 + k * 5) % 17) / 17.0f - 0.5f;
    const float* r = &x[size_t(i * 3)];
    y[size_t(i * 2)] = 2.0 * r[0] - r[1] + 0.25;
    y[size_t(i * 2 + 1)] = -r[2];
  }
  const Bytes xb = npy_bytes(dict("<f4", "(400, 3)"), raw(x)), yb = npy_bytes(dict("<f8", "(400, 2)"), raw(y));
  const fs::path dir = npy_set("npy_regression_cli", xb, yb, xb, yb);
  fs::remove(dir / "x_test.npy");
  fs::remove(dir / "y_test.npy");
  const fs::path model = dir / "linear.json";
  std::ofstream(model) << R"({"class_name": "Sequential", "config": [{"class_name": "Dense", "config": {"name": "out",
    "units": 2, "batch_input_shape": [null, 3]}}], "keras_version": "2.2.4"})";
  const fs::path metrics = dir / "run.jsonl";
  const std::string cmd = std::string(LOUPE_CLI) + " train " + model.string() + " --device cpu --plain --no-nvml " +
                          "--loss mse --optimizer adam --lr 0.05 --epochs 30 --val-split 0.25 --data " + dir.string();
  auto [rc, out] = loupe::test::run_command(cmd + " --metrics " + metrics.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(300 train, 100 held out by --val-split; x float32 [N, 3]; float targets [N, 2]); resident, "
                     "since the loader carries class labels, not targets"), std::string::npos) << out;
  EXPECT_EQ(out.find(" acc "), std::string::npos) << out;
  const size_t done = out.find("done in ");
  ASSERT_NE(done, std::string::npos) << out;
  const size_t at = out.find("final test loss ", done);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_LT(std::stod(out.substr(at + 16)), 1e-3) << out;  // a linear map, learned
  std::ifstream recs(metrics);
  std::string line;
  int records = 0;
  while (std::getline(recs, line)) {
    ++records;
    EXPECT_NE(line.find("\"train_acc\":null,\"test_acc\":null"), std::string::npos) << line;
  }
  EXPECT_EQ(records, 30);
  // One target per sample for two outputs; then a NaN among them.
  std::ofstream(dir / "y_train.npy", std::ios::binary | std::ios::trunc) << std::string(
      [&] { Bytes b = npy_bytes(dict("<f8", "(400,)"), raw(bad)); return std::string(b.begin(), b.end()); }());
  auto [rc2, out2] = loupe::test::run_command(cmd);
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("y_train.npy: targets of shape [400] for 400 samples; the model has 2 outputs, so expected "
                      "[400, 2]"), std::string::npos) << out2;
  y[7] = std::nan("");
  std::ofstream(dir / "y_train.npy", std::ios::binary | std::ios::trunc) << std::string(
      [&] { Bytes b = npy_bytes(dict("<f8", "(400, 2)"), raw(y)); return std::string(b.begin(), b.end()); }());
  auto [rc3, out3] = loupe::test::run_command(cmd);
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_NE(out3.find("y_train.npy: target 3, output 1 is NaN; a regression trains on finite values"), std::string::npos)
      << out3;
  fs::remove_all(dir);
}

// The same arrays in one .npz (np.savez and np.savez_compressed, written by NumPy 1.24: the fuzz
// corpus's seeds), for the loaders and the command; an archive without y_train is refused by name.
TEST(NpyFeatures, NpzArchivesAsFolders) {
  if (!loupe::data::npz_supported()) GTEST_SKIP() << "built without libzip";
  const fs::path corpus = fs::path(LOUPE_SOURCE_DIR) / "tests/fuzz/corpus/npz";
  for (const char* name : {"savez", "savez_compressed"}) {
    const fs::path npz = loupe::test::temp_path(std::string(name) + ".npz");
    fs::copy_file(corpus / name, npz, fs::copy_options::overwrite_existing);
    ASSERT_TRUE(loupe::data::has_npy_arrays(npz.string())) << name;
    const loupe::data::NpyFeatures a = loupe::data::load_npy_features(npz.string(), {6}, 3, false);
    EXPECT_EQ(a.n_train, 4);
    EXPECT_EQ(a.n_test, 2);
    EXPECT_FLOAT_EQ(a.train_x[23], 2.3f) << name;  // np.arange(24) / 10
    EXPECT_EQ(a.train_labels, (Bytes{0, 1, 2, 1})) << name;
    fs::remove(npz);
  }
  const fs::path partial = loupe::test::temp_path("no_y_train.npz");
  fs::copy_file(corpus / "no_y_train", partial, fs::copy_options::overwrite_existing);
  const std::string no_y = arrays_refusal(partial);
  EXPECT_NE(no_y.find("has no array y_train"), std::string::npos) << "an archive without y_train: '" << no_y << "'";
  fs::remove(partial);
  // The command: a model file and a train-only archive split by --val-split.
  const fs::path dir = loupe::test::temp_path("npz_cli");
  fs::create_directories(dir);
  fs::copy_file(corpus / "train_only", dir / "data.npz", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "model.json") << R"({"class_name": "Sequential", "config": [{"class_name": "Dense", "config":
    {"name": "out", "units": 3, "activation": "softmax", "batch_input_shape": [null, 6]}}]})";
  auto [rc, out] = loupe::test::run_command(std::string(LOUPE_CLI) + " train " + (dir / "model.json").string() +
                                            " --device cpu --plain --no-nvml --epochs 1 --batch 2 --val-split 0.25 --data " +
                                            (dir / "data.npz").string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(3 train, 1 held out by --val-split; x float32 [N, 6])"), std::string::npos) << out;
  fs::remove_all(dir);
}

namespace {
// How `f` ends in a child process that may map 1 GiB more and is ended by an alarm after 10 s
// (a reader that opens a FIFO blocks there): "error: <message>", "bad_alloc", or a status.
template <class F>
std::string in_child(F f) {
  return loupe::test::run_with_memory_limit([&] {
    alarm(10);
    f();
  });
}
}  // namespace

// A data file that is not a regular file is named for what it is before it is opened: x_train.npy
// as a FIFO blocked in fopen(), as a loop of symbolic links it was "not x_train.npy", and a FIFO
// named .npz got libzip's "Operation not supported".
TEST(NpyFiles, NotRegularFilesAreRefusedBeforeOpening) {
  const Bytes x = npy_bytes(dict("<f4", "(2, 1)"), raw(std::vector<float>{1, 2}));
  const Bytes y = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 1}));
  const fs::path dir = npy_set("npy_fifo", x, y, x, y);
  auto load = [&] { loupe::data::load_npy_features(dir.string(), {1}, 2, false); };
  fs::remove(dir / "x_train.npy");
  ASSERT_EQ(mkfifo((dir / "x_train.npy").c_str(), 0600), 0);
  const std::string tail = ", not a .npy file; give a regular file";
  EXPECT_EQ(in_child(load), "error: " + (dir / "x_train.npy").string() + " is a FIFO (named pipe)" + tail);
  EXPECT_EQ(in_child([&] { loupe::data::read_npy((dir / "x_train.npy").string()); }),
            "error: " + (dir / "x_train.npy").string() + " is a FIFO (named pipe)" + tail);
  fs::remove(dir / "x_train.npy");
  fs::create_symlink(dir / "x_train.npy", dir / "x_train.npy");
  EXPECT_EQ(in_child(load), "error: " + (dir / "x_train.npy").string() + " is a loop of symbolic links" + tail);
  fs::remove(dir / "x_test.npy");
  fs::create_directory(dir / "x_test.npy");
  EXPECT_EQ(in_child([&] { loupe::data::read_npy((dir / "x_test.npy").string()); }),
            "error: " + (dir / "x_test.npy").string() + " is a directory" + tail);
  if (loupe::data::npz_supported()) {
    const fs::path npz = dir / "data.npz", loop = dir / "loop.npz";
    ASSERT_EQ(mkfifo(npz.c_str(), 0600), 0);
    fs::create_symlink(loop, loop);
    const std::string npz_tail = ", not a .npz file; give a regular file";
    EXPECT_EQ(in_child([&] { loupe::data::has_npy_arrays(npz.string()); }),
              "error: " + npz.string() + " is a FIFO (named pipe)" + npz_tail);
    EXPECT_EQ(in_child([&] { loupe::data::has_npy_arrays(loop.string()); }),
              "error: " + loop.string() + " is a loop of symbolic links" + npz_tail);
  }
  fs::remove_all(dir);
}

// A .npz member's .npy header is read before the member is inflated: a size the archive declares
// that is not the header's is refused at once (a 1 KB archive whose member's header declares
// 12,800 bytes and which inflates to 1 GiB), and so is a member that would inflate to more than
// 50 times its compressed size (and 64 MiB): a 1 KB bzip2 member of 1 GiB. Both used to be inflated
// whole first, past the 1 GiB more that the child may map. A stored member that declares 4 GB in an
// archive of 348 bytes is refused before its room is reserved.
TEST(NpzMembers, ABombIsRefusedBeforeItInflates) {
  if (!loupe::data::npz_supported()) GTEST_SKIP() << "built without libzip";
  const fs::path corpus = fs::path(LOUPE_SOURCE_DIR) / "tests/fuzz/corpus/npz";
  const std::string declared = (corpus / "header_12800_member_1gib").string();
  EXPECT_EQ(in_child([&] {
              const auto z = loupe::data::open_npz(declared);
              loupe::data::npz_array(*z, "x_train");
            }),
            "error: " + declared + ": x_train.npy: 1,073,729,024 bytes after the 12,800 bytes of data the shape "
            "declares");
  const std::string bomb = (corpus / "bomb_bzip2_1gib").string();
  const std::string got = in_child([&] {
    const auto z = loupe::data::open_npz(bomb);
    loupe::data::npz_array(*z, "x_train");
  });
  EXPECT_EQ(got.rfind("error: " + bomb + ": x_train.npy: 1,073,741,952 bytes from ", 0), 0u) << got;
  const std::string stored = (corpus / "stored_past_the_end").string();
  EXPECT_EQ(in_child([&] {
              const auto z = loupe::data::open_npz(stored);
              loupe::data::npz_array(*z, "x_train");
            }),
            "error: " + stored + ": x_train.npy: 4,000,000,128 compressed bytes declared, more than the archive's 348: "
            "a damaged archive");
  EXPECT_NE(got.find(" times); loupe inflates a member to at most 50 times its compressed size "
                     "(or 64 MiB): a damaged or hostile archive (np.savez_compressed's arrays compress far less; "
                     "np.savez stores them whole)"), std::string::npos) << got;
}

// float64 (and int64) values are converted to float32 with a range check, by row: 1e300 passed the
// finiteness check on the double and trained as inf. float32's largest value is taken, as x and as
// a regression's target; past it, either sign, x and targets are refused with the file, row and value.
TEST(NpyFeatures, ValuesOutsideFloat32AreRefusedByRow) {
  const Bytes lab = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 1}));
  auto x_of = [](double v) { return npy_bytes(dict("<f8", "(2, 2)"), raw(std::vector<double>{1, 2, 3, v})); };
  const double max = double(std::numeric_limits<float>::max());
  fs::path dir = npy_set("npy_range", x_of(max), lab, x_of(-max), lab);
  const loupe::data::NpyFeatures ok = loupe::data::load_npy_features(dir.string(), {2}, 2, false);
  EXPECT_EQ(ok.train_x[3], std::numeric_limits<float>::max());
  EXPECT_EQ(ok.test_x[3], -std::numeric_limits<float>::max());
  auto error = [&](int classes) {
    try {
      loupe::data::load_npy_features(dir.string(), {2}, classes, false, 0, 2);
    } catch (const loupe::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const double v : {1e300, -1e39}) {
    std::ofstream(dir / "x_test.npy", std::ios::binary | std::ios::trunc) << std::string(
        [&] { Bytes b = x_of(v); return std::string(b.begin(), b.end()); }());
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    EXPECT_EQ(error(2), (dir / "x_test.npy").string() + ": row 1 holds " + text + ", outside float32's range "
              "(at most 3.4e38 either side); scale the values, or save them as float32");
  }
  // A regression's targets: the same bound, the same words.
  std::ofstream(dir / "x_test.npy", std::ios::binary | std::ios::trunc) << std::string(
      [&] { Bytes b = x_of(1); return std::string(b.begin(), b.end()); }());
  std::ofstream(dir / "y_train.npy", std::ios::binary | std::ios::trunc) << std::string(
      [&] { Bytes b = x_of(max); return std::string(b.begin(), b.end()); }());
  std::ofstream(dir / "y_test.npy", std::ios::binary | std::ios::trunc) << std::string(
      [&] { Bytes b = x_of(-1e300); return std::string(b.begin(), b.end()); }());
  EXPECT_EQ(error(0), (dir / "y_test.npy").string() + ": row 1 holds -1e+300, outside float32's range "
            "(at most 3.4e38 either side); scale the values, or save them as float32");
  fs::remove_all(dir);
}

// A label out of range is reported by its row and its value, which the message once confused
// ("label 0 is not a whole number from 0 to 4" where row 0 holds 9); any dtype's value as written.
TEST(NpyImages, ABadLabelIsNamedByRowAndValue) {
  const Bytes x = npy_bytes(dict("|u1", "(3, 2, 2)"), Bytes(12, 1));
  auto error = [&](const Bytes& y) {
    const fs::path dir = npy_set("npy_label_rows", x, y, x, y);
    std::string got;
    try {
      loupe::data::load_npy_images(dir.string(), {2, 2}, 5);
    } catch (const loupe::Error& e) {
      got = e.what();
    }
    fs::remove_all(dir);
    return got;
  };
  const std::string rest = "; labels must be whole numbers from 0 to 4 (the model has 5 classes)";
  EXPECT_NE(error(npy_bytes(dict("<i8", "(3,)"), raw(std::vector<int64_t>{9, 1, 2}))).find(
                "y_train.npy: row 0 holds label 9" + rest), std::string::npos);
  EXPECT_NE(error(npy_bytes(dict("<i8", "(3,)"), raw(std::vector<int64_t>{1, 2, -3}))).find(
                "y_train.npy: row 2 holds label -3" + rest), std::string::npos);
  EXPECT_NE(error(npy_bytes(dict("<i8", "(3,)"), raw(std::vector<int64_t>{1, int64_t(1) << 62, 0}))).find(
                "y_train.npy: row 1 holds label 4611686018427387904" + rest), std::string::npos);
  EXPECT_NE(error(npy_bytes(dict("<f4", "(3, 1)"), raw(std::vector<float>{1, 2, 2.5f}))).find(
                "y_train.npy: row 2 holds label 2.5" + rest), std::string::npos);
  EXPECT_NE(error(npy_bytes(dict("<f8", "(3,)"), raw(std::vector<double>{std::nan(""), 2, 2}))).find(
                "y_train.npy: row 0 holds label nan" + rest), std::string::npos);
}

// Token ids are checked against the Embedding's input_dim when they are loaded, every id of
// x_train and x_test, by file, row and id: they were caught in the first batch only, at a shuffled
// position, without the file. Through the command, the model file's input_dim is the bound.
TEST(NpyFeatures, TokenIdsPastTheVocabularyAreRefusedAtLoad) {
  const Bytes lab = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 1}));
  const Bytes good = npy_bytes(dict("<i8", "(2, 3)"), raw(std::vector<int64_t>{0, 1, 2, 3, 4, 4}));
  const Bytes past = npy_bytes(dict("<i4", "(2, 3)"), raw(std::vector<int32_t>{0, 1, 2, 3, 5, 4}));
  const fs::path dir = npy_set("npy_vocab", good, lab, past, lab);
  auto error = [&](int64_t vocab) {
    try {
      loupe::data::load_npy_features(dir.string(), {3}, 2, true, 0, 1, vocab);
    } catch (const loupe::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(6), "");
  EXPECT_EQ(error(5), (dir / "x_test.npy").string() + ": row 1 holds id 5, past the Embedding's input_dim 5 (ids "
            "0 to 4); give the model a larger input_dim, or map the ids below it");
  const fs::path model = dir / "emb.json";
  std::ofstream(model) << R"({"class_name": "Sequential", "config": [{"class_name": "Embedding", "config": {"name": "e",
    "input_dim": 5, "output_dim": 2, "batch_input_shape": [null, 3]}}, {"class_name": "GlobalAveragePooling1D",
    "config": {"name": "p"}}, {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}]})";
  auto [rc, out] = loupe::test::run_command(std::string(LOUPE_CLI) + " train " + model.string() +
                                            " --device cpu --plain --no-nvml --epochs 1 --data " + dir.string());
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find((dir / "x_test.npy").string() + ": row 1 holds id 5, past the Embedding's input_dim 5"),
            std::string::npos) << out;
  fs::remove_all(dir);
}

// A model file's time length of None (-1 in the shape asked for) is the arrays' own: x_train's,
// which x_test must have too; through the command, the file trains on sequences of that length.
TEST(NpyFeatures, AFreeTimeLengthIsTheArrays) {
  const Bytes lab = npy_bytes(dict("<i8", "(2,)"), raw(std::vector<int64_t>{0, 1}));
  const Bytes four = npy_bytes(dict("<i8", "(2, 4)"), raw(std::vector<int64_t>{0, 1, 2, 3, 4, 4, 1, 0}));
  const Bytes three = npy_bytes(dict("<i4", "(2, 3)"), raw(std::vector<int32_t>{0, 1, 2, 3, 4, 4}));
  fs::path dir = npy_set("npy_free_length", four, lab, four, lab);
  const loupe::data::NpyFeatures f = loupe::data::load_npy_features(dir.string(), {-1}, 2, true, 0, 1, 5);
  EXPECT_EQ(f.sample, (std::vector<int64_t>{4}));
  EXPECT_EQ(f.train_x.size(), 8u);
  const fs::path model = dir / "free.json";
  std::ofstream(model) << R"({"class_name": "Sequential", "config": [{"class_name": "Embedding", "config": {"name": "e",
    "input_dim": 5, "output_dim": 2, "batch_input_shape": [null, null]}}, {"class_name": "LSTM", "config": {"name": "l",
    "units": 3}}, {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}],
    "keras_version": "2.2.4"})";
  auto [rc, out] = loupe::test::run_command(std::string(LOUPE_CLI) + " train " + model.string() +
                                            " --device cpu --plain --no-nvml --epochs 1 --batch 2 --data " + dir.string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("input [None]"), std::string::npos) << out;
  EXPECT_NE(out.find("x int64 [N, 4]"), std::string::npos) << out;
  fs::remove_all(dir);
  dir = npy_set("npy_free_length_test", four, lab, three, lab);
  try {
    loupe::data::load_npy_features(dir.string(), {-1}, 2, true, 0, 1, 5);
    ADD_FAILURE() << "read";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x_test.npy: arrays of shape [2, 3]; the model takes [N, 4]"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// A file whose declared data would not fit in what the machine has free is refused by its size
// before the data are allocated (core/host_memory.h), not met by the allocator: an 800 MB array (a
// sparse file: nothing on disk) read in a child allowed 256 MiB more address space.
TEST(NpyFiles, DataPastTheFreeMemoryAreRefusedBeforeTheyAreRead) {
  if (LOUPE_TEST_ASAN) LOUPE_SKIP_NOT_HERE << "AddressSanitizer's shadow memory leaves no room for RLIMIT_AS (tests/test_util.h)";
  const Bytes head = npy_bytes(dict("<f4", "(200000, 1000)"), {});
  const fs::path p = write("npy_past_free_memory.npy", head);
  fs::resize_file(p, head.size() + uint64_t(200000) * 1000 * 4);
  const std::string got = loupe::test::run_with_memory_limit([&] { loupe::data::read_npy(p.string()); },
                                                             size_t(256) << 20);
  EXPECT_EQ(got.rfind("error: " + p.string() + " needs about 800 MB, more than the ", 0), 0u) << got;
  EXPECT_NE(got.find(" this machine has free: its data do not fit in this machine's memory"), std::string::npos) << got;
  fs::remove(p);
}

// The same check with no limit set, so that it holds in every build (AddressSanitizer's too): a
// sparse file declaring 2 TiB of data, more than any machine here has, is refused by its size
// before anything is allocated or read.
TEST(NpyFiles, DataPastAnyMachinesMemoryAreRefusedBeforeTheyAreRead) {
  const Bytes head = npy_bytes(dict("<f4", "(536870912, 1024)"), {});
  const fs::path p = write("npy_past_any_memory.npy", head);
  fs::resize_file(p, head.size() + (uint64_t(1) << 41));
  std::string got;
  try {
    loupe::data::read_npy(p.string());
  } catch (const loupe::Error& e) {
    got = e.what();
  }
  fs::remove(p);
  EXPECT_EQ(got.rfind(p.string() + " needs about 2199.0 GB, more than the ", 0), 0u) << got;
}
