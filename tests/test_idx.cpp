// The MNIST IDX reader: round trips of hand-built files (raw and gzip), every corruption we
// promise to catch, the four-file loader, the default search order, and the real
// Fashion-MNIST from Debian's dataset-fashion-mnist package when it is installed.
#include <gtest/gtest.h>

#include "test_util.h"
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/idx.h"

namespace fs = std::filesystem;
using loupe::data::IdxArray;
using Bytes = std::vector<uint8_t>;

namespace {

// An IDX file byte for byte as published: 0, 0, type, ndim, big-endian uint32 sizes, data.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t type = 0x08) {
  Bytes b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes iota_bytes(size_t n, int mod = 256) {
  Bytes v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 % mod);
  return v;
}

void write_raw(const fs::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

void write_gz(const fs::path& p, const Bytes& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs f, expects a loupe::Error naming `file` and containing `needle`.
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

class Idx : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("loupe_idx_" + std::to_string(getpid()) + "_" + t->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A tiny MNIST-format set: n_train/n_test images of rows x cols, in directory `sub`.
  fs::path make_set(const std::string& sub, int n_train = 5, int n_test = 3, int rows = 4,
                    int cols = 3) {
    fs::path d = dir_ / sub;
    fs::create_directories(d);
    write_raw(d / "train-images-idx3-ubyte",
              idx_bytes({uint32_t(n_train), uint32_t(rows), uint32_t(cols)},
                        iota_bytes(size_t(n_train) * rows * cols)));
    write_gz(d / "train-labels-idx1-ubyte.gz", idx_bytes({uint32_t(n_train)}, iota_bytes(n_train, 10)));
    write_gz(d / "t10k-images-idx3-ubyte.gz",
             idx_bytes({uint32_t(n_test), uint32_t(rows), uint32_t(cols)},
                       iota_bytes(size_t(n_test) * rows * cols)));
    write_raw(d / "t10k-labels-idx1-ubyte", idx_bytes({uint32_t(n_test)}, iota_bytes(n_test, 10)));
    return d;
  }

  fs::path dir_;
};

TEST_F(Idx, RawRoundTrip) {
  Bytes data = iota_bytes(2 * 3 * 4);
  write_raw(dir_ / "a.idx", idx_bytes({2, 3, 4}, data));
  IdxArray a = loupe::data::read_idx((dir_ / "a.idx").string());
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a.data, data);
}

TEST_F(Idx, GzipDetectedByMagicNotName) {
  Bytes data = iota_bytes(300);
  write_gz(dir_ / "packed", idx_bytes({300}, data));        // gzip without .gz
  write_raw(dir_ / "plain.gz", idx_bytes({10, 30}, data));  // raw despite .gz
  IdxArray a = loupe::data::read_idx((dir_ / "packed").string());
  EXPECT_EQ(a.dims, (std::vector<int64_t>{300}));
  EXPECT_EQ(a.data, data);
  IdxArray b = loupe::data::read_idx((dir_ / "plain.gz").string());
  EXPECT_EQ(b.dims, (std::vector<int64_t>{10, 30}));
  EXPECT_EQ(b.data, data);
}

TEST_F(Idx, ConcatenatedGzipMembersAreOneStream) {
  Bytes whole = idx_bytes({6}, {1, 2, 3, 4, 5, 6});
  write_gz(dir_ / "p1", Bytes(whole.begin(), whole.begin() + 7));
  write_gz(dir_ / "p2", Bytes(whole.begin() + 7, whole.end()));
  Bytes cat = read_all(dir_ / "p1"), p2 = read_all(dir_ / "p2");
  cat.insert(cat.end(), p2.begin(), p2.end());
  write_raw(dir_ / "cat.gz", cat);
  EXPECT_EQ(loupe::data::read_idx((dir_ / "cat.gz").string()).data, (Bytes{1, 2, 3, 4, 5, 6}));
}

TEST_F(Idx, HeaderErrors) {
  auto check = [&](const std::string& name, const Bytes& b, const std::string& needle) {
    write_raw(dir_ / name, b);
    expect_error([&] { loupe::data::read_idx((dir_ / name).string()); }, name, needle);
  };
  Bytes good = idx_bytes({4}, {0, 1, 2, 3});
  Bytes magic = good;
  magic[1] = 0x12;
  check("bad_magic", magic, "first two bytes must be 0x00 0x00");
  check("float_type", idx_bytes({4}, Bytes(16), 0x0D), "type byte is 0x0d (float32)");
  Bytes nd0 = good;
  nd0[3] = 0;
  check("ndim0", nd0, "0 dimensions");
  Bytes nd5 = good;
  nd5[3] = 5;
  check("ndim5", nd5, "5 dimensions");
  check("zero_dim", idx_bytes({3, 0}, {}), "dimension 1 is 0");
  check("absurd", idx_bytes({65536, 65536}, {}), "more than the 2^31");
  check("short_header", Bytes{0, 0, 8, 3, 0, 0}, "truncated: the header needs 16 bytes");
  check("tiny", Bytes{0, 0}, "too short");
  check("empty", Bytes{}, "too short");
}

TEST_F(Idx, TruncatedAndTrailingData) {
  Bytes full = idx_bytes({2, 3, 4}, iota_bytes(24));
  write_raw(dir_ / "short", Bytes(full.begin(), full.end() - 5));
  expect_error([&] { loupe::data::read_idx((dir_ / "short").string()); }, "short",
               "truncated: expected 24 bytes of data, found 19");
  Bytes longer = full;
  longer.insert(longer.end(), {9, 9, 9});
  write_raw(dir_ / "long", longer);
  expect_error([&] { loupe::data::read_idx((dir_ / "long").string()); }, "long",
               "3 bytes of trailing garbage");
  // The same checks apply to the decompressed contents of a gzip file.
  write_gz(dir_ / "short.gz", Bytes(full.begin(), full.end() - 5));
  expect_error([&] { loupe::data::read_idx((dir_ / "short.gz").string()); }, "short.gz",
               "found 19 (after decompression)");
}

// A gzip bomb: a 1,000-byte IDX file with 256 MiB of zeros after it, about 250 KB compressed. It
// is refused once the output passes the header's size, without inflating the rest (peak memory
// grows by far less than the bomb; the old reader inflated all of it, ~512 MiB, first).
TEST_F(Idx, GzipBombStopsAtTheDeclaredSize) {
  const fs::path p = dir_ / "bomb.gz";
  {
    gzFile f = gzopen(p.c_str(), "wb1");
    ASSERT_NE(f, nullptr);
    Bytes head = idx_bytes({10, 10, 10}, iota_bytes(1000));
    ASSERT_EQ(gzwrite(f, head.data(), unsigned(head.size())), int(head.size()));
    Bytes zeros(1 << 20);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(gzwrite(f, zeros.data(), unsigned(zeros.size())), int(zeros.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  ASSERT_LT(fs::file_size(p), 2u << 20);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  expect_error([&] { loupe::data::read_idx(p.string()); }, "bomb.gz",
               "inflates to more than the 1016 bytes its IDX header declares");
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "peak memory grew by " << after.ru_maxrss - before.ru_maxrss
                                                           << " KiB";
}

// A valid gzip file of `head` followed by `zero_mib` MiB of zeros, made at its compressed size:
// once deflate's window holds only zeros, each further MiB of them (flushed at its end) deflates to
// the same bytes, so that MiB is deflated once and its bytes repeated; the trailer's CRC-32 is
// combined from the pieces'. A 2 GiB file of zeros is 2.1 MB, made in milliseconds.
Bytes gzip_with_zeros(const Bytes& head, size_t zero_mib) {
  z_stream zs{};
  // Raw deflate: the gzip wrapper is written here.
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  auto deflate_part = [&](const Bytes& in, int flush) {
    Bytes out(deflateBound(&zs, uLong(in.size())) + 64);
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = uInt(in.size());
    zs.next_out = out.data();
    zs.avail_out = uInt(out.size());
    deflate(&zs, flush);
    EXPECT_EQ(zs.avail_in, 0u);
    out.resize(out.size() - zs.avail_out);
    return out;
  };
  const Bytes mib(1 << 20);
  Bytes gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  const Bytes start = deflate_part(head, Z_SYNC_FLUSH), first = deflate_part(mib, Z_SYNC_FLUSH);
  const Bytes steady = deflate_part(mib, Z_SYNC_FLUSH);
  EXPECT_EQ(deflate_part(mib, Z_SYNC_FLUSH), steady) << "deflate's output for a MiB of zeros is not steady";
  const Bytes end = deflate_part({}, Z_FINISH);
  deflateEnd(&zs);
  gz.insert(gz.end(), start.begin(), start.end());
  uLong crc = crc32(0, head.data(), uInt(head.size()));
  const uLong crc_mib = crc32(0, mib.data(), uInt(mib.size()));
  for (size_t i = 0; i < zero_mib; ++i) {
    const Bytes& part = i == 0 ? first : steady;
    gz.insert(gz.end(), part.begin(), part.end());
    crc = crc32_combine(crc, crc_mib, 1 << 20);
  }
  gz.insert(gz.end(), end.begin(), end.end());
  const uint64_t size = head.size() + (uint64_t(zero_mib) << 20);
  for (uint64_t v : {uint64_t(crc), size})
    for (int k = 0; k < 4; ++k) gz.push_back(uint8_t(v >> (8 * k)));  // CRC-32, then the size mod 2^32
  return gz;
}

// Bytes that do not compress (xorshift), for a file whose compressed size must be large.
Bytes noise(size_t n) {
  Bytes b(n);
  uint64_t x = 88172645463325252ull;
  for (uint8_t& v : b) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = uint8_t(x >> 32);
  }
  return b;
}

// The hostile-input round (docs/fuzzing.md, "Size caps"): a 2.1 MB gzip IDX file, valid in every
// byte, declaring 2^31 bytes of images (the most the header may) and inflating to them, all zeros.
// It took 3.4 GB and trained to "test accuracy 100.00 %". Now its declared size, 1,000 times its
// compressed size, is refused before anything is allocated for it: in a child allowed 1 GiB more
// address space, the reader ends with that error rather than bad_alloc.
TEST_F(Idx, GzipDeclaringFarMoreThanItsSizeIsRefusedBeforeInflating) {
  const fs::path p = dir_ / "train-images-idx3-ubyte.gz";
  write_raw(p, gzip_with_zeros(idx_bytes({32768, 256, 256}, {}), 2048));
  ASSERT_LT(fs::file_size(p), 2200000u);
  ASSERT_GT(fs::file_size(p), 2000000u);
  const std::string got = loupe::test::run_with_memory_limit([&] { loupe::data::read_idx(p.string()); });
  EXPECT_EQ(got.rfind("error: " + p.string() + ": its IDX header declares 2,147,483,648 bytes of images, ", 0), 0u)
      << got;
  EXPECT_NE(got.find("times its 2.1 MB compressed size"), std::string::npos) << got;
  EXPECT_NE(got.find("no more than 50 times a file's size (or 64 MiB)"), std::string::npos) << got;
}

// What the cap lets through: anything up to the 64 MiB floor, however well it compresses (32 MiB of
// zeros in 33 KB), and above it a file that inflates to at most 50 times its size; 76 times is
// refused.
TEST_F(Idx, GzipInflatingWithinTheFloorOrTheRatioIsRead) {
  const fs::path small = dir_ / "small.gz";
  write_raw(small, gzip_with_zeros(idx_bytes({512, 256, 256}, {}), 32));
  ASSERT_LT(fs::file_size(small), 64000u);
  const IdxArray a = loupe::data::read_idx(small.string());
  EXPECT_EQ(a.dims, (std::vector<int64_t>{512, 256, 256}));
  EXPECT_EQ(a.data.size(), size_t(32) << 20);

  // 1.75 MiB of noise and 80 MiB of zeros: 85.7 MB in 1.9 MB, 45 times.
  const fs::path ok = dir_ / "ok.gz";
  write_raw(ok, gzip_with_zeros(idx_bytes({28 + 1280, 256, 256}, noise(28 << 16)), 80));
  EXPECT_EQ(loupe::data::read_idx(ok.string()).dims[0], 1308);
  // 1 MiB of noise and 81 MiB of zeros: 86 MB in 1.1 MB, 76 times.
  const fs::path over = dir_ / "over.gz";
  write_raw(over, gzip_with_zeros(idx_bytes({16 + 1296, 256, 256}, noise(16 << 16)), 81));
  expect_error([&] { loupe::data::read_idx(over.string()); }, "over.gz",
               "declares 85,983,232 bytes of images, 75 times its 1.1 MB compressed size");
}

// A raw IDX file larger than any IDX file loupe accepts (3 GiB, sparse) is refused from its size
// before it is read: the reader read all of it, then found the header wrong.
TEST_F(Idx, FileLargerThanAnyIdxIsRefusedBeforeReading) {
  const fs::path p = dir_ / "train-images-idx3-ubyte";
  write_raw(p, idx_bytes({60000, 28, 28}, {}));
  fs::resize_file(p, uint64_t(3) << 30);
  const std::string got = loupe::test::run_with_memory_limit([&] { loupe::data::read_idx(p.string()); });
  EXPECT_EQ(got, "error: " + p.string() + ": 3,221,225,472 bytes, more than the 2,151,677,952 an IDX file can take "
                 "(2^31 elements, the most loupe reads, and a header): not an MNIST-format file; check the path, "
                 "or delete it and fetch it again (data/fetch.sh)");
}

TEST_F(Idx, DamagedGzip) {
  write_gz(dir_ / "ok.gz", idx_bytes({1000}, iota_bytes(1000)));
  Bytes gz = read_all(dir_ / "ok.gz");
  write_raw(dir_ / "cut.gz", Bytes(gz.begin(), gz.begin() + gz.size() / 2));
  expect_error([&] { loupe::data::read_idx((dir_ / "cut.gz").string()); }, "cut.gz",
               "truncated gzip stream");
  write_raw(dir_ / "nocrc.gz", Bytes(gz.begin(), gz.end() - 4));  // trailer cut
  expect_error([&] { loupe::data::read_idx((dir_ / "nocrc.gz").string()); }, "nocrc.gz",
               "truncated gzip stream");
  Bytes flipped = gz;
  for (size_t i = 12; i < flipped.size() - 8; ++i) flipped[i] ^= 0x5a;
  write_raw(dir_ / "flip.gz", flipped);
  expect_error([&] { loupe::data::read_idx((dir_ / "flip.gz").string()); }, "flip.gz",
               "corrupt gzip stream");
  Bytes tail = gz;
  tail.insert(tail.end(), {1, 2, 3});
  write_raw(dir_ / "tail.gz", tail);
  expect_error([&] { loupe::data::read_idx((dir_ / "tail.gz").string()); }, "tail.gz",
               "trailing garbage after the gzip stream");
}

TEST_F(Idx, MissingFile) {
  expect_error([&] { loupe::data::read_idx((dir_ / "nope-idx3-ubyte").string()); },
               "nope-idx3-ubyte", "file not found");
}

TEST_F(Idx, LoadTinySet) {
  fs::path d = make_set("tiny");
  loupe::data::MnistData m = loupe::data::load_mnist(d.string());
  EXPECT_EQ(m.name, "MNIST-format");
  EXPECT_EQ(m.dir, d.string());
  EXPECT_EQ(m.rows, 4);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.n_train, 5);
  EXPECT_EQ(m.n_test, 3);
  EXPECT_EQ(m.train_images, iota_bytes(5 * 12));
  EXPECT_EQ(m.train_labels, iota_bytes(5, 10));
  EXPECT_EQ(m.test_images, iota_bytes(3 * 12));
  EXPECT_EQ(m.test_labels, iota_bytes(3, 10));
  EXPECT_EQ(loupe::data::load_mnist(make_set("My-FASHION-data").string() + "/").name,
            "Fashion-MNIST");
  EXPECT_EQ(loupe::data::load_mnist(make_set("mnist").string()).name, "MNIST");
}

TEST_F(Idx, LoadSetErrors) {
  fs::path d = make_set("set");
  fs::remove(d / "t10k-labels-idx1-ubyte");
  expect_error([&] { loupe::data::load_mnist(d.string()); }, "t10k-labels-idx1-ubyte.gz",
               "tried t10k-labels-idx1-ubyte and");

  write_raw(d / "t10k-labels-idx1-ubyte", idx_bytes({4}, {1, 2, 3, 4}));  // 4 labels, 3 images
  expect_error([&] { loupe::data::load_mnist(d.string()); }, "t10k-labels-idx1-ubyte",
               "holds 4 labels but");

  write_raw(d / "t10k-labels-idx1-ubyte", idx_bytes({3}, {1, 10, 3}));
  expect_error([&] { loupe::data::load_mnist(d.string()); }, "t10k-labels-idx1-ubyte",
               "label 10 at index 1 is out of range");

  write_raw(d / "t10k-labels-idx1-ubyte", idx_bytes({3}, {1, 2, 3}));
  write_raw(d / "t10k-images-idx3-ubyte", idx_bytes({3, 12}, iota_bytes(36)));  // 2-D; raw wins
  expect_error([&] { loupe::data::load_mnist(d.string()); }, "t10k-images-idx3-ubyte",
               "expected a 3-D image array");

  write_raw(d / "t10k-images-idx3-ubyte", idx_bytes({3, 3, 4}, iota_bytes(36)));
  expect_error([&] { loupe::data::load_mnist(d.string()); }, "t10k-images-idx3-ubyte",
               "images are 3x4 but the training images");

  write_raw(d / "t10k-images-idx3-ubyte", idx_bytes({3, 4, 3}, iota_bytes(36)));
  EXPECT_NO_THROW(loupe::data::load_mnist(d.string()));
  expect_error([&] { loupe::data::load_mnist((dir_ / "absent").string()); }, "absent",
               "data directory not found");
  // Something there that is not a folder says what it is (a loop of links was "not found").
  fs::create_symlink(dir_ / "loop_b", dir_ / "loop_a");
  fs::create_symlink(dir_ / "loop_a", dir_ / "loop_b");
  expect_error([&] { loupe::data::load_mnist((dir_ / "loop_a").string()); }, "loop_a",
               "is a loop of symbolic links, not a directory");
  expect_error([&] { loupe::data::load_mnist((d / "t10k-labels-idx1-ubyte").string()); }, "t10k-labels-idx1-ubyte",
               "is a regular file, not a directory");
}

using loupe::test::EnvVar;

TEST_F(Idx, DefaultDirSearchOrder) {
  fs::create_directories(dir_ / "cwd");
  EnvVar data("LOUPE_DATA", (dir_ / "ld").string()), home("HOME", (dir_ / "home").string());
  struct Cwd {  // restored even when an assertion returns early
    fs::path old = fs::current_path();
    ~Cwd() { fs::current_path(old); }
  } cwd;
  fs::current_path(dir_ / "cwd");
  auto found = [] { return loupe::data::find_default_mnist_dir().value_or(""); };
  const std::string debian = "/usr/share/datasets/fashion-mnist";
  const bool has_debian = fs::exists(debian + "/train-images-idx3-ubyte.gz");

  EXPECT_EQ(found(), has_debian ? debian : "");
  make_set("cwd/data/fashion-mnist");
  EXPECT_EQ(found(), "data/fashion-mnist");
  make_set("ld/fashion-mnist");
  EXPECT_EQ(found(), (dir_ / "ld/fashion-mnist").string());
  make_set("cwd/data/mnist");  // MNIST proper beats Fashion-MNIST anywhere
  EXPECT_EQ(found(), "data/mnist");
  make_set("home/.cache/loupe/mnist");
  EXPECT_EQ(found(), (dir_ / "home/.cache/loupe/mnist").string());
  fs::path ld_mnist = make_set("ld/mnist");
  fs::remove(ld_mnist / "train-labels-idx1-ubyte.gz");  // incomplete: skipped
  EXPECT_EQ(found(), (dir_ / "home/.cache/loupe/mnist").string());
  write_raw(ld_mnist / "train-labels-idx1-ubyte", idx_bytes({5}, iota_bytes(5, 10)));
  EXPECT_EQ(found(), (dir_ / "ld/mnist").string());

  std::string how = loupe::data::how_to_get_data();
  EXPECT_NE(how.find("data/fetch.sh mnist"), std::string::npos) << how;
  EXPECT_NE(how.find("apt-get install dataset-fashion-mnist"), std::string::npos) << how;
  EXPECT_NE(how.find((dir_ / "ld/mnist").string()), std::string::npos) << how;
}

TEST(IdxDebian, FashionMnistPackage) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << dir << " not found; sudo apt-get install dataset-fashion-mnist to run this";
  loupe::data::MnistData m = loupe::data::load_mnist(dir);
  EXPECT_EQ(m.name, "Fashion-MNIST");
  EXPECT_EQ(m.n_train, 60000);
  EXPECT_EQ(m.n_test, 10000);
  EXPECT_EQ(m.rows, 28);
  EXPECT_EQ(m.cols, 28);
  EXPECT_EQ(m.train_images.size(), 60000u * 28 * 28);
  EXPECT_EQ(m.test_images.size(), 10000u * 28 * 28);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int> train(10), test(10);
  for (uint8_t l : m.train_labels) train[l]++;
  for (uint8_t l : m.test_labels) test[l]++;
  EXPECT_EQ(train, std::vector<int>(10, 6000));
  EXPECT_EQ(test, std::vector<int>(10, 1000));
}

}  // namespace
