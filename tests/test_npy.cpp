// The .npy reader (data/npy.h): files written here byte for byte as numpy.lib.format writes them
// (versions 1.0, 2.0 and 3.0, every dtype loupe reads), read back exactly; and every refusal the
// reader promises, each in its sentence. No NumPy needed: the format is simple and published.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/npy.h"
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
