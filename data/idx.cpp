#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/file_check.h"
#include "data/paths.h"

namespace fs = std::filesystem;

namespace loupe::data {
namespace {

const char* kFiles[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
const char* kRefetch = "delete it and fetch it again (data/fetch.sh)";

std::string hex(unsigned v) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%02x", v & 0xffu);
  return s;
}

// An IDX file holds at most 2^31 elements (a header declaring more is refused) and its header.
constexpr uint64_t kMaxElements = uint64_t(1) << 31;
// The most an IDX file may take on disk, raw or compressed, checked before it is read: the most
// elements and a header, with room for what gzip adds to incompressible data (0.03% and a few
// bytes). A larger file cannot be one loupe would accept.
constexpr uint64_t kMaxFileBytes = kMaxElements + (uint64_t(1) << 22);

// What a gzip IDX file may inflate to, checked against its header's declared size before anything
// is allocated for it: a size over both the floor and the ratio times the compressed file's size is
// refused. Real IDX files compress 1.8-2.0x (Fashion-MNIST's four files, measured) to 4.8x
// (MNIST's images, from their published sizes; its labels 2.1-2.2x): 50 is ten times the most
// compressible real set, while a file of zeros (what a hostile or damaged one tends to hold)
// compresses 1,000x. The floor lets
// any small set through whatever its ratio (blank or synthetic images compress far better) and is
// all such a file can cost.
constexpr uint64_t kInflateFloor = uint64_t(64) << 20;
constexpr uint64_t kInflateRatio = 50;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) refuse_file(path, "file not found");
  if (fs::is_directory(path, ec)) refuse_file(path, "is a directory, not an IDX file");
  if (const std::string kind = what_else(path); !kind.empty()) refuse_file(path, "is " + kind + ", not an IDX file");
  std::vector<uint8_t> b;
  uint64_t size = 0;
  if (!read_capped(path, kMaxFileBytes, &b, &size))
    refuse_file(path, with_commas(size) + " bytes, more than the " + with_commas(kMaxFileBytes) +
                  " an IDX file can take (2^31 elements, the most loupe reads, and a header): not an MNIST-format "
                  "file; check the path, or " + kRefetch);
  return b;
}

// The size an IDX file's header declares (header + data), once `have` bytes of it are known: 0
// while the header is incomplete, SIZE_MAX when it is no valid header (parse_idx() then says why).
size_t declared_size(const uint8_t* b, size_t have) {
  if (have < 4) return 0;
  if (b[0] != 0 || b[1] != 0 || b[2] != 0x08 || b[3] < 1 || b[3] > 4) return SIZE_MAX;
  const size_t header = 4 + 4 * size_t(b[3]);
  if (have < header) return 0;
  uint64_t total = 1;
  for (size_t i = 0; i < b[3]; ++i) {
    const uint64_t d = uint64_t(b[4 + 4 * i]) << 24 | uint64_t(b[5 + 4 * i]) << 16 | uint64_t(b[6 + 4 * i]) << 8 |
                       uint64_t(b[7 + 4 * i]);
    total *= d;
    if (d == 0 || total > kMaxElements) return SIZE_MAX;
  }
  return header + size_t(total);
}

// Why a gzip IDX file whose header declares `declared` bytes (header included) is refused before
// anything is inflated for it, or "" when that size is plausible for its compressed size.
std::string implausible_idx(const uint8_t* header, uint64_t declared, uint64_t compressed) {
  if (declared <= kInflateFloor || declared <= kInflateRatio * compressed) return "";
  const unsigned ndim = header[3];
  const char* what = ndim == 3 ? "images" : ndim == 1 ? "labels" : "data";
  return "its IDX header declares " + with_commas(declared - (4 + 4 * ndim)) + " bytes of " + what + ", " +
         with_commas(declared / compressed) + " times its " + short_size(compressed) +
         " compressed size, but real IDX files compress about 2-5x and loupe inflates no more than " +
         std::to_string(kInflateRatio) + " times a file's size (or 64 MiB): a damaged or hostile file; " + kRefetch;
}

// Inflates a whole gzip file in memory (inflate rather than gzread: gzread silently returns a
// short count for a truncated stream and ignores trailing garbage, and we want both as errors).
// The IDX header comes out first, alone: its size is checked (implausible_idx()) before the rest is
// given room, all at once. Then never past that size: the output may grow to it and one byte
// more, and that byte is an error. (A 1 MB file that inflated to 1 GiB took 3.3 GB and 14 s before
// its trailing bytes were refused; a 2.1 MB one declaring 2 GiB took 3.4 GB and was accepted.)
std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& in) {
  static_assert(kMaxFileBytes <= 0xffffffffu, "zlib takes a 32-bit input size");
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) refuse_file(path, "zlib could not start inflating");
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  std::vector<uint8_t> out(4 + 4 * 4);  // the largest IDX header
  size_t have = 0, declared = 0;
  std::string err;
  for (;;) {
    if (!declared) {
      declared = declared_size(out.data(), have);
      if (declared == SIZE_MAX) break;  // not an IDX header: parse_idx() says what is wrong with it
      if (declared && !(err = implausible_idx(out.data(), declared, in.size())).empty()) break;
      if (declared && !(err = host_memory_shortfall(double(declared), "inflated, it", "")).empty()) break;
      if (declared) out.resize(declared + 1);
    }
    if (declared && have > declared) {
      err = "inflates to more than the " + std::to_string(declared) +
            " bytes its IDX header declares (stopped there, unread); " + kRefetch;
      break;
    }
    // Until the header is known, no further than its next part: the magic, then the dimensions.
    const size_t end = declared ? declared + 1 : have < 4 ? 4 : 4 + 4 * size_t(out[3]);
    const size_t room = std::min<size_t>(end - have, 1u << 30);
    zs.next_out = out.data() + have;
    zs.avail_out = static_cast<uInt>(room);
    int rc = inflate(&zs, Z_NO_FLUSH);
    have += room - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // gzip allows several members back to back; anything else after the stream is damage.
      if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      err = std::to_string(zs.avail_in) + " bytes of trailing garbage after the gzip stream; " +
            kRefetch;
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;  // this part is full: on to the next
    if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && zs.avail_out > 0)) {
      err = "truncated gzip stream (the download was probably cut short); " +
            std::string(kRefetch);
      break;
    }
    if (rc != Z_OK) {
      err = std::string("corrupt gzip stream (zlib: ") + (zs.msg ? zs.msg : "error " +
            std::to_string(rc)) + "); " + kRefetch;
      break;
    }
  }
  inflateEnd(&zs);
  if (!err.empty()) refuse_file(path, err);
  out.resize(have);
  return out;
}

const char* type_name(unsigned t) {
  switch (t) {
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

IdxArray parse_idx(const std::string& path, std::vector<uint8_t> b, bool gz) {
  const std::string after = gz ? " (after decompression)" : "";
  if (b.size() < 4)
    refuse_file(path, "too short to be an IDX file (" + std::to_string(b.size()) + " bytes" + after +
                  "); " + kRefetch);
  if (b[0] != 0 || b[1] != 0)
    refuse_file(path, "not an IDX file: the first two bytes must be 0x00 0x00, found " + hex(b[0]) + " " +
                  hex(b[1]) + after + "; check the path, or " + kRefetch);
  if (b[2] != 0x08)
    refuse_file(path, "IDX type byte is " + hex(b[2]) + " (" + type_name(b[2]) +
                  "), but loupe reads only unsigned-byte IDX files (0x08), the type MNIST uses");
  const unsigned ndim = b[3];
  if (ndim < 1 || ndim > 4)
    refuse_file(path, "IDX header says " + std::to_string(ndim) +
                  " dimensions; expected 1 to 4 (images have 3, labels 1); " + kRefetch);
  const size_t header = 4 + 4 * size_t(ndim);
  if (b.size() < header)
    refuse_file(path, "truncated: the header needs " + std::to_string(header) + " bytes, found " +
                  std::to_string(b.size()) + after + "; " + kRefetch);
  IdxArray a;
  uint64_t total = 1;
  std::string shape;
  for (unsigned i = 0; i < ndim; ++i) {
    uint32_t d = be32(&b[4 + 4 * i]);
    shape += (i ? " x " : "") + std::to_string(d);
    if (d == 0) refuse_file(path, "dimension " + std::to_string(i) + " is 0 in the IDX header; " + kRefetch);
    total *= d;  // cannot overflow: total <= 2^31 before, d < 2^32
    if (total > kMaxElements)
      refuse_file(path, "IDX header declares dimensions " + shape + "..., more than the 2^31 elements "
                "loupe accepts; the header is corrupt, " + kRefetch);
    a.dims.push_back(d);
  }
  const size_t found = b.size() - header;
  if (found < total)
    refuse_file(path, "truncated: expected " + std::to_string(total) + " bytes of data, found " +
                  std::to_string(found) + after + " (shape " + shape + "); " + kRefetch);
  if (found > total)
    refuse_file(path, std::to_string(found - total) + " bytes of trailing garbage after the " +
                  std::to_string(total) + " bytes of data the header declares (shape " + shape +
                  ")" + after + "; " + kRefetch);
  b.erase(b.begin(), b.begin() + header);
  a.data = std::move(b);
  return a;
}

// The raw file if present, else the .gz one, else empty.
std::string find_file(const fs::path& dir, const std::string& base) {
  std::error_code ec;
  for (const std::string& name : {base, base + ".gz"})
    if (fs::is_regular_file(dir / name, ec)) return (dir / name).string();
  return "";
}

bool complete_set(const fs::path& dir) {
  for (const char* f : kFiles)
    if (find_file(dir, f).empty()) return false;
  return true;
}

std::string guess_name(const std::string& dir) {
  std::string last = fs::absolute(dir).lexically_normal().string();
  while (last.size() > 1 && last.back() == '/') last.pop_back();
  last = fs::path(last).filename().string();
  for (char& c : last) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (last.find("fashion") != std::string::npos) return "Fashion-MNIST";
  if (last.find("mnist") != std::string::npos) return "MNIST";
  return "MNIST-format";
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> b = read_bytes(path);
  const bool gz = b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b;
  if (gz) b = gunzip(path, b);
  return parse_idx(path, std::move(b), gz);
}

MnistData load_mnist(const std::string& dir) {
  if (const std::string why = directory_problem(dir, "data directory"); !why.empty())
    throw Error(dir + ": " + why + "; pass --data with a directory holding the four MNIST IDX files, or run "
                "data/fetch.sh");
  std::string paths[4];
  IdxArray arr[4];
  for (int i = 0; i < 4; ++i) {
    paths[i] = find_file(dir, kFiles[i]);
    if (paths[i].empty())
      throw Error((fs::path(dir) / kFiles[i]).string() + ": file not found (tried " + kFiles[i] +
                  " and " + kFiles[i] + ".gz); run data/fetch.sh mnist or pass --data with a "
                  "directory that holds all four MNIST files");
    arr[i] = read_idx(paths[i]);
  }
  MnistData m;
  m.dir = dir;
  m.name = guess_name(dir);
  m.train_images_file = paths[0];
  for (int s = 0; s < 2; ++s) {  // s = 0: train, 1: test
    const std::string &ip = paths[2 * s], &lp = paths[2 * s + 1];
    IdxArray &im = arr[2 * s], &lb = arr[2 * s + 1];
    if (im.dims.size() != 3)
      refuse_file(ip, "expected a 3-D image array (count x rows x cols), found " +
                  std::to_string(im.dims.size()) + "-D; is this an images file?");
    if (lb.dims.size() != 1)
      refuse_file(lp, "expected a 1-D label array, found " + std::to_string(lb.dims.size()) +
                  "-D; is this a labels file?");
    if (lb.dims[0] != im.dims[0])
      refuse_file(lp, "holds " + std::to_string(lb.dims[0]) + " labels but " + ip + " holds " +
                  std::to_string(im.dims[0]) + " images; the two files come from different sets");
    for (size_t k = 0; k < lb.data.size(); ++k)
      if (lb.data[k] >= 10)
        refuse_file(lp, "label " + std::to_string(lb.data[k]) + " at index " + std::to_string(k) +
                    " is out of range (MNIST labels are 0 to 9); " + kRefetch);
    if (s == 0) {
      m.rows = im.dims[1], m.cols = im.dims[2];
    } else if (im.dims[1] != m.rows || im.dims[2] != m.cols) {
      refuse_file(ip, "images are " + std::to_string(im.dims[1]) + "x" + std::to_string(im.dims[2]) +
                  " but the training images in " + paths[0] + " are " + std::to_string(m.rows) +
                  "x" + std::to_string(m.cols) + "; train and test must come from one set");
    }
  }
  m.n_train = arr[0].dims[0], m.n_test = arr[2].dims[0];
  m.train_images = std::move(arr[0].data), m.train_labels = std::move(arr[1].data);
  m.test_images = std::move(arr[2].data), m.test_labels = std::move(arr[3].data);
  return m;
}

std::vector<std::string> default_mnist_dirs() {
  std::vector<std::string> dirs = search_places("mnist");  // MNIST proper first, in every place
  for (std::string& d : search_places("fashion-mnist")) dirs.push_back(std::move(d));
  dirs.push_back("/usr/share/datasets/fashion-mnist");  // Debian's dataset-fashion-mnist
  return dirs;
}

std::optional<std::string> find_default_mnist_dir() { return first_usable(default_mnist_dirs(), complete_set); }

std::string how_to_get_data() {
  const std::string looked = list_places(default_mnist_dirs());
  return "To get MNIST-format data, use one of:\n"
         "  data/fetch.sh mnist                          download MNIST to ~/.cache/loupe/mnist\n"
         "  sudo apt-get install dataset-fashion-mnist   Debian/Ubuntu package, found as is\n"
         "  data/fetch.sh fashion-mnist                  Fashion-MNIST (links the Debian copy)\n"
         "or pass --data DIR, a directory holding train-images-idx3-ubyte, "
         "train-labels-idx1-ubyte,\nt10k-images-idx3-ubyte and t10k-labels-idx1-ubyte "
         "(raw or .gz).\nWithout --data loupe looks in: " + looked + "\n";
}

}  // namespace loupe::data
