// data/npy.h: NumPy's .npy format, strictly.
#include "data/npy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/file_check.h"
#include "core/shape.h"
#include "data/paths.h"

namespace loupe::data {

const char* npy_type_name(NpyType t) {
  switch (t) {
    case NpyType::U8: return "uint8";
    case NpyType::I32: return "int32";
    case NpyType::I64: return "int64";
    case NpyType::F16: return "float16";
    case NpyType::F32: return "float32";
    case NpyType::F64: return "float64";
  }
  return "?";
}

size_t npy_type_size(NpyType t) {
  switch (t) {
    case NpyType::U8: return 1;
    case NpyType::F16: return 2;
    case NpyType::I32: case NpyType::F32: return 4;
    case NpyType::I64: case NpyType::F64: return 8;
  }
  return 0;
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeader = 1 << 20;  // NumPy's own limit is far smaller (its headers are ~100 bytes)

// The header dict literal, parsed by hand as the format defines it (a Python literal, which no
// JSON library reads): strings in single or double quotes, True/False, tuples of integers.
struct HeaderParser {
  const std::string& s;
  const std::string& file;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) {
    throw Error(file + ": not a valid .npy header (" + what + " at character " + std::to_string(i + 1) + ")");
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a quoted string");
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\' || static_cast<unsigned char>(s[i]) < 0x20) fail("an escape or control character in a string");
      ++i;
    }
    if (i >= s.size()) fail("an unterminated string");
    return s.substr(start, i++ - start);
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) return i += 4, true;
    if (s.compare(i, 5, "False") == 0) return i += 5, false;
    fail("expected True or False");
  }
  int64_t integer() {
    ws();
    if (i >= s.size() || s[i] < '0' || s[i] > '9') fail("expected a dimension (a whole number)");
    int64_t v = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a dimension too large");
      v = v * 10 + (s[i] - '0');
    }
    if (i < s.size() && (s[i] == 'L' || s[i] == 'l')) ++i;  // Python 2's long suffix, in old files
    return v;
  }
  std::vector<int64_t> tuple() {
    if (!eat('(')) fail("expected a tuple for the shape");
    std::vector<int64_t> dims;
    if (eat(')')) return dims;
    for (;;) {
      dims.push_back(integer());
      if (dims.size() > 32) fail("more than 32 dimensions");
      if (eat(')')) return dims;
      if (!eat(',')) fail("expected ',' or ')' in the shape");
      if (eat(')')) return dims;  // (n,) and a trailing comma
    }
  }
};

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

Header parse_header(const std::string& text, const std::string& file) {
  HeaderParser p{text, file};
  Header h;
  bool has_descr = false, has_order = false, has_shape = false;
  if (!p.eat('{')) p.fail("expected '{'");
  while (!p.eat('}')) {
    const std::string key = p.str();
    if (!p.eat(':')) p.fail("expected ':' after '" + key + "'");
    if (key == "descr" && !has_descr) h.descr = p.str(), has_descr = true;
    else if (key == "fortran_order" && !has_order) h.fortran = p.boolean(), has_order = true;
    else if (key == "shape" && !has_shape) h.shape = p.tuple(), has_shape = true;
    else p.fail("a key other than descr, fortran_order and shape, or one twice: '" + key + "'");
    if (!p.eat(',')) {
      if (!p.eat('}')) p.fail("expected ',' or '}'");
      break;
    }
  }
  p.ws();
  if (p.i + 1 != text.size() || text.back() != '\n') p.fail("expected the header to end in spaces and one newline");
  if (!has_descr || !has_order || !has_shape) p.fail("missing one of descr, fortran_order and shape");
  return h;
}

NpyType type_of(const std::string& descr, const std::string& file) {
  struct Known { const char* descr; NpyType type; };
  static const Known kKnown[] = {{"|u1", NpyType::U8},  {"<u1", NpyType::U8},  {"<i4", NpyType::I32}, {"<i8", NpyType::I64},
                                 {"<f2", NpyType::F16}, {"<f4", NpyType::F32}, {"<f8", NpyType::F64}};
  for (const Known& k : kKnown)
    if (descr == k.descr) return k.type;
  if (!descr.empty() && descr[0] == '>')
    throw Error(file + ": the array is big-endian ('" + descr + "'); loupe reads little-endian arrays (save it with "
                "a.astype(a.dtype.newbyteorder('<')))");
  throw Error(file + ": dtype '" + descr + "' is not one loupe reads (uint8, int32, int64, float16, float32, "
              "float64)");
}

// The header's bytes: [header_start, header_start + length), after the magic, version and length.
struct Preamble {
  size_t header_start = 0, header_len = 0;
};

Preamble preamble(const uint8_t* p, size_t n, const std::string& file) {
  if (n < 10 || std::memcmp(p, kMagic, 6) != 0) throw Error(file + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    throw Error(file + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                "; loupe reads 1.0, 2.0 and 3.0");
  Preamble pre;
  if (major == 1) {
    pre.header_start = 10;
    pre.header_len = size_t(p[8]) | size_t(p[9]) << 8;
  } else {
    if (n < 12) throw Error(file + ": truncated in the header's length");
    pre.header_start = 12;
    pre.header_len = size_t(p[8]) | size_t(p[9]) << 8 | size_t(p[10]) << 16 | size_t(p[11]) << 24;
  }
  if (pre.header_len > kMaxHeader) throw Error(file + ": a header of " + std::to_string(pre.header_len) +
                                               " bytes declared; a .npy header is a few hundred");
  return pre;
}

// The data's byte count from the header, every step checked for overflow.
size_t data_bytes(const Header& h, NpyType t, const std::string& file) {
  uint64_t n = npy_type_size(t);
  for (size_t k = 0; k < h.shape.size(); ++k) {
    const uint64_t d = uint64_t(h.shape[k]);
    if (d != 0 && n > (uint64_t(1) << 62) / d)
      throw Error(file + ": the shape declares more than 2^62 bytes");
    n *= d;
  }
  return size_t(n);
}

NpyArray assemble(const Header& h, const std::string& file, size_t available, const uint8_t* data) {
  if (h.fortran)
    throw Error(file + ": fortran_order is True; loupe reads C-order arrays (save np.ascontiguousarray(a))");
  NpyArray a;
  a.type = type_of(h.descr, file);
  a.shape = h.shape;
  const size_t want = data_bytes(h, a.type, file);
  if (available < want)
    throw Error(file + ": truncated: the shape needs " + with_commas(want) + " bytes of data, the file has " +
                with_commas(available));
  if (available > want)
    throw Error(file + ": " + with_commas(available - want) + " bytes after the " + with_commas(want) +
                " bytes of data the shape declares");
  if (data) a.bytes.assign(data, data + want);
  return a;
}

}  // namespace

NpyArray parse_npy(const std::string& name, const std::vector<uint8_t>& f) {
  const Preamble pre = preamble(f.data(), f.size(), name);
  if (f.size() - pre.header_start < pre.header_len) throw Error(name + ": truncated in the header");
  const std::string text(reinterpret_cast<const char*>(f.data()) + pre.header_start, pre.header_len);
  const size_t end = pre.header_start + pre.header_len;
  return assemble(parse_header(text, name), name, f.size() - end, f.data() + end);
}

size_t npy_header_bytes(const std::string& name, const uint8_t* p, size_t n) {
  const Preamble pre = preamble(p, n, name);
  return pre.header_start + pre.header_len;
}

NpyArray npy_declared(const std::string& name, const std::vector<uint8_t>& head, uint64_t size) {
  const Preamble pre = preamble(head.data(), head.size(), name);
  if (head.size() < pre.header_start + pre.header_len || size < head.size()) throw Error(name + ": truncated in the header");
  const std::string text(reinterpret_cast<const char*>(head.data()) + pre.header_start, pre.header_len);
  return assemble(parse_header(text, name), name, size_t(size - head.size()), nullptr);
}

NpyArray read_npy(const std::string& path) {
  // The type first (data/paths.h): opening a FIFO blocks, and a device reads without end.
  const int fd = open_data_file(path, "a .npy file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    ::close(fd);
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fileno(f.get()), &st) != 0) throw Error(path + ": cannot read its size: " + std::strerror(errno));
  const size_t size = size_t(st.st_size);
  uint8_t head[12] = {};
  const size_t got = std::fread(head, 1, sizeof head, f.get());
  const Preamble pre = preamble(head, got, path);
  if (size < pre.header_start + pre.header_len) throw Error(path + ": truncated in the header");
  std::string text(pre.header_len, '\0');
  if (std::fseek(f.get(), long(pre.header_start), SEEK_SET) != 0 ||
      std::fread(text.data(), 1, text.size(), f.get()) != text.size())
    throw Error(path + ": cannot read its header: " + std::strerror(errno));
  const Header h = parse_header(text, path);
  // Checked against the file's size before the data is allocated: the allocation is the file's.
  const size_t available = size - pre.header_start - pre.header_len;
  NpyArray a = assemble(h, path, available, nullptr);
  require_host_memory(double(available), path, "its data do not fit in this machine's memory");
  a.bytes.resize(available);
  if (std::fread(a.bytes.data(), 1, available, f.get()) != available)
    throw Error(path + ": cannot read its data: " + std::strerror(errno));
  return a;
}

}  // namespace loupe::data

namespace loupe::data {
namespace {

const char* const kNpyFiles[] = {"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"};

// The images of one file as [N, C, H, W] bytes; `layout` says how they were stored.
std::vector<uint8_t> images_of(const NpyArray& a, const std::string& file, const std::vector<int64_t>& sample,
                               int64_t& n, std::string& layout) {
  const int64_t C = sample.size() == 3 ? sample[0] : 1, H = sample[sample.size() - 2], W = sample.back();
  const std::string want = C == 1 ? "[N, " + std::to_string(H) + ", " + std::to_string(W) + "]" :
                                    "[N, " + std::to_string(H) + ", " + std::to_string(W) + ", " + std::to_string(C) + "]";
  if (a.type != NpyType::U8)
    throw Error(file + ": images of dtype " + npy_type_name(a.type) + "; loupe reads uint8 images here (as "
                "keras.datasets gives them: save x.astype(np.uint8) of 0..255 pixels)");
  const auto& d = a.shape;
  n = d.empty() ? 0 : d[0];
  if (d.size() == 3 && C == 1 && d[1] == H && d[2] == W) return layout = "[N, H, W]", a.bytes;
  if (d.size() == 4 && d[1] == C && d[2] == H && d[3] == W) return layout = "[N, C, H, W]", a.bytes;
  if (!(d.size() == 4 && d[1] == H && d[2] == W && d[3] == C))
    throw Error(file + ": images of shape " + dims_text(d) + "; the model takes " + want + " (or channels first)");
  layout = "[N, H, W, C] (channels-last, transposed once)";
  std::vector<uint8_t> out(a.bytes.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        for (int64_t c = 0; c < C; ++c)
          out[size_t(((i * C + c) * H + y) * W + x)] = a.bytes[size_t(((i * H + y) * W + x) * C + c)];
  return out;
}

double value_at(const NpyArray& a, int64_t i) {
  switch (a.type) {
    case NpyType::U8: return a.bytes[size_t(i)];
    case NpyType::I32: { int32_t v; std::memcpy(&v, &a.bytes[size_t(i) * 4], 4); return v; }
    case NpyType::I64: { int64_t v; std::memcpy(&v, &a.bytes[size_t(i) * 8], 8); return double(v); }
    case NpyType::F16: { uint16_t v; std::memcpy(&v, &a.bytes[size_t(i) * 2], 2); return half_to_float(v); }
    case NpyType::F32: { float v; std::memcpy(&v, &a.bytes[size_t(i) * 4], 4); return v; }
    case NpyType::F64: { double v; std::memcpy(&v, &a.bytes[size_t(i) * 8], 8); return v; }
  }
  return 0;
}

// Element i as the file holds it, for a message: integers exactly, floats as %g ("2.5", "1e+300", "nan").
std::string value_text(const NpyArray& a, int64_t i) {
  if (a.type == NpyType::I64) {
    int64_t v;
    std::memcpy(&v, &a.bytes[size_t(i) * 8], 8);
    return std::to_string(v);
  }
  const double v = value_at(a, i);
  if (a.type == NpyType::U8 || a.type == NpyType::I32) return std::to_string(int64_t(v));
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

// Element i as float32 (times `scale`), refused by its row where float32 cannot hold it: a finite
// float64 past 3.4e38 would become inf after any finiteness check on the double.
float to_float32(const NpyArray& a, int64_t i, double scale, const std::string& file, int64_t row) {
  const float f = float(value_at(a, i) * scale);
  if (std::isinf(f) && std::isfinite(value_at(a, i)))
    throw Error(file + ": row " + std::to_string(row) + " holds " + value_text(a, i) + ", outside float32's range (at "
                "most 3.4e38 either side); scale the values, or save them as float32");
  return f;
}

// A label's whole number, or -1 for anything else (a fraction, NaN, a negative or huge value):
// labels_of refuses -1 as it refuses any value outside its classes.
int64_t integer_at(const NpyArray& a, int64_t i) {
  if (a.type == NpyType::F16) return -1;  // labels_of refuses float16 labels by name first
  const double v = value_at(a, i);
  return v >= 0 && v < 2147483648.0 && v == std::floor(v) ? int64_t(v) : -1;
}

// A regression's targets: [N] or [N, 1] for one output, [N, outputs] for several; any of the six
// dtypes, as float32, every value finite.
std::vector<float> targets_of(const NpyArray& a, const std::string& file, int64_t n, int64_t outputs) {
  const auto& d = a.shape;
  const bool ok = !d.empty() && d[0] == n &&
                  ((d.size() == 1 && outputs == 1) || (d.size() == 2 && d[1] == outputs));
  if (!ok)
    throw Error(file + ": targets of shape " + dims_text(d) + " for " + std::to_string(n) + " samples; the model has " +
                std::to_string(outputs) + " output" + (outputs == 1 ? "" : "s") + ", so expected [" + std::to_string(n) +
                ", " + std::to_string(outputs) + "]" + (outputs == 1 ? " or [" + std::to_string(n) + "]" : ""));
  std::vector<float> out(static_cast<size_t>(n * outputs));
  for (int64_t i = 0; i < n * outputs; ++i) {
    const double v = value_at(a, i);
    if (!std::isfinite(v))
      throw Error(file + ": target " + std::to_string(i / outputs) + (outputs > 1 ? ", output " +
                  std::to_string(i % outputs) : std::string()) + " is " + (std::isnan(v) ? "NaN" : "infinite") +
                  "; a regression trains on finite values");
    out[size_t(i)] = to_float32(a, i, 1.0, file, i / outputs);
  }
  return out;
}

// Labels [N] or [N, 1] (integers below `classes`), or one-hot [N, classes].
std::vector<uint8_t> labels_of(const NpyArray& a, const std::string& file, int64_t n, int classes) {
  const auto& d = a.shape;
  const bool one_hot = d.size() == 2 && d[1] == classes && classes > 1;
  if (d.empty() || d[0] != n || !(d.size() == 1 || (d.size() == 2 && (d[1] == 1 || one_hot))))
    throw Error(file + ": labels of shape " + dims_text(d) + " for " + std::to_string(n) + " images; expected [" +
                std::to_string(n) + "], [" + std::to_string(n) + ", 1] or one-hot [" + std::to_string(n) + ", " +
                std::to_string(classes) + "]");
  if (a.type == NpyType::F16) throw Error(file + ": float16 labels; save them as integers (or one-hot float32)");
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = -1;
    if (one_hot) {
      int ones = 0;
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t v = integer_at(a, i * classes + c);
        if (v != 0 && v != 1) ones = 2;
        if (v == 1) ++ones, label = c;
      }
      if (ones != 1) throw Error(file + ": row " + std::to_string(i) + " is not one-hot (exactly one 1, the rest 0)");
    } else {
      label = integer_at(a, i);
    }
    if (label < 0 || label >= classes)  // (a one-hot row's label is in range: its column)
      throw Error(file + ": row " + std::to_string(i) + " holds label " + value_text(a, i) + "; labels must be whole "
                  "numbers from 0 to " + std::to_string(classes - 1) + " (the model has " + std::to_string(classes) +
                  " classes)");
    out[size_t(i)] = uint8_t(label);
  }
  return out;
}

}  // namespace

static bool is_npz(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0;
}

bool has_npy_arrays(const std::string& dir) {
  if (is_npz(dir)) {  // a .npz names its arrays: the training pair must be there
    const std::shared_ptr<NpzFile> z = open_npz(dir);
    for (const char* name : {"x_train", "y_train"})
      if (!npz_has(*z, name))
        throw Error(dir + ": has no array " + name + "; a NumPy data set holds x_train, y_train, x_test and y_test "
                    "(np.savez(path, x_train=..., y_train=..., x_test=..., y_test=...), or the first two and --val-split)");
    if (npz_has(*z, "x_test") != npz_has(*z, "y_test"))
      throw Error(dir + ": has " + (npz_has(*z, "x_test") ? "x_test but not y_test" : "y_test but not x_test"));
    return true;
  }
  int found = 0;
  std::string missing;
  for (const char* f : kNpyFiles) {
    struct stat st {};
    if (lstat((dir + "/" + f).c_str(), &st) == 0) ++found;  // a link that leads nowhere: its reader says so
    else missing += std::string(missing.empty() ? "" : ", ") + f;
  }
  if (found > 0 && found < 4 && missing != "x_test.npy, y_test.npy")
    throw Error(dir + ": has NumPy arrays but not " + missing + "; a NumPy data set is x_train.npy, y_train.npy, "
                "x_test.npy and y_test.npy (or the first two, split by --val-split)");
  return found > 0;
}

namespace {
// The rows past the first `keep` of v (n rows of equal width) moved into `tail`; an empty v (labels
// of a regression, targets of a classifier) stays empty.
template <class T>
void split_rows(std::vector<T>& v, std::vector<T>& tail, int64_t n, int64_t keep) {
  const size_t per = v.size() / size_t(n);
  tail.assign(v.begin() + std::ptrdiff_t(size_t(keep) * per), v.end());
  v.resize(size_t(keep) * per);
}

// The last `share` of the training arrays as the test set (at least one sample, at least one left),
// for the images (NpyImages) and a model file's samples (NpyFeatures) alike: x and the labels.
template <class R, class X>
void hold_out(R& r, X R::*train_x, X R::*test_x, double share, const std::string& dir, const char* what) {
  const int64_t n = r.n_train, held = std::max<int64_t>(1, int64_t(double(n) * share + 0.5));
  if (held >= n)
    throw Error(dir + ": x_train.npy holds " + std::to_string(n) + " " + what + ", too few to hold out " +
                std::to_string(share) + " of them and train on the rest");
  split_rows(r.*train_x, r.*test_x, n, n - held);
  split_rows(r.train_labels, r.test_labels, n, n - held);
  r.n_train = n - held;
  r.n_test = held;
  r.split = true;
}

// Where the four arrays come from: a folder of .npy files, or one .npz.
class ArraySource {
 public:
  explicit ArraySource(const std::string& data) : data_(data) {
    if (is_npz(data)) npz_ = open_npz(data);
  }
  std::string file(const std::string& name) const {
    return npz_ ? data_ + ": " + name + ".npy" : data_ + "/" + name + ".npy";
  }
  bool has(const std::string& name) const {
    struct stat st {};
    return npz_ ? npz_has(*npz_, name) : lstat(file(name).c_str(), &st) == 0;  // as has_npy_arrays
  }
  NpyArray read(const std::string& name) const {
    if (!npz_) return read_npy(file(name));
    std::optional<NpyArray> a = npz_array(*npz_, name);
    if (!a) throw Error(file(name) + ": not in the archive");
    return std::move(*a);
  }
  // Whether there are test arrays; --val-split where there are, or none where there are not, refused.
  bool test_arrays(double val_split) const {
    const bool has_test = has("x_test");
    if (has_test && val_split > 0)
      throw Error(data_ + ": has x_test and y_test, so --val-split has nothing to do (it holds out part of the "
                  "training arrays where there are no test arrays); leave it out");
    if (!has_test && val_split <= 0)
      throw Error(data_ + ": has x_train and y_train but no x_test and y_test; give --val-split F to hold out the "
                  "last F of the training arrays as the test set (e.g. --val-split 0.1)");
    return has_test;
  }

 private:
  std::string data_;
  std::shared_ptr<NpzFile> npz_;
};
}  // namespace

NpyImages load_npy_images(const std::string& dir, const std::vector<int64_t>& sample, int classes,
                          double val_split) {
  NpyImages r;
  std::string test_layout;
  const ArraySource src(dir);
  const bool has_test = src.test_arrays(val_split);
  r.train_images = images_of(src.read("x_train"), src.file("x_train"), sample, r.n_train, r.layout);
  r.train_labels = labels_of(src.read("y_train"), src.file("y_train"), r.n_train, classes);
  if (has_test) {
    r.test_images = images_of(src.read("x_test"), src.file("x_test"), sample, r.n_test, test_layout);
    r.test_labels = labels_of(src.read("y_test"), src.file("y_test"), r.n_test, classes);
  } else {
    hold_out(r, &NpyImages::train_images, &NpyImages::test_images, val_split, dir, "images");
  }
  if (r.n_train == 0 || r.n_test == 0) throw Error(dir + ": x_train or x_test holds no images");
  return r;
}

namespace {

// A token id's refusal, by row: not a whole number from 0, or past the Embedding's input_dim
// (`vocab`; 0: none known, then 2^24, past which float32 holds no whole number exactly).
void check_id(const NpyArray& a, int64_t i, int64_t vocab, const std::string& file, int64_t row) {
  const double v = value_at(a, i);
  const std::string at = file + ": row " + std::to_string(row) + " holds ";
  if (!(v >= 0 && v < 16777216 && v == std::floor(v)))
    throw Error(at + value_text(a, i) + ", not a token id (a whole number from 0) the model's Embedding can look up");
  if (vocab > 0 && v >= double(vocab))
    throw Error(at + "id " + value_text(a, i) + ", past the Embedding's input_dim " + std::to_string(vocab) + " (ids 0 to " +
                std::to_string(vocab - 1) + "); give the model a larger input_dim, or map the ids below it");
}

// The samples of one file as float32, checked against the model's input shape; token ids against
// the vocabulary, every one, here where the file and row can be named.
std::vector<float> features_of(const NpyArray& a, const std::string& file, const std::vector<int64_t>& sample,
                               bool ids, int64_t vocab, int64_t& n) {
  const auto& d = a.shape;
  if (d.size() != sample.size() + 1 || !std::equal(sample.begin(), sample.end(), d.begin() + 1))
    throw Error(file + ": arrays of shape " + dims_text(d) + "; the model takes [N" +
                dims_text(sample).replace(0, 1, ", ") + " (its input, channels-last as Keras has it)");
  n = d[0];
  std::vector<float> out(static_cast<size_t>(a.numel()));
  const double scale = a.type == NpyType::U8 && !ids ? 1.0 / 255 : 1.0;
  const int64_t per = n ? a.numel() / n : 1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (ids) check_id(a, i, vocab, file, i / per);
    if (!std::isfinite(value_at(a, i)))
      throw Error(file + ": row " + std::to_string(i / per) + " holds " + value_text(a, i) + "; the values must be "
                  "finite");
    out[size_t(i)] = to_float32(a, i, scale, file, i / per);
  }
  return out;
}

}  // namespace

NpyFeatures load_npy_features(const std::string& dir, const std::vector<int64_t>& sample, int classes, bool ids,
                              double val_split, int64_t outputs, int64_t vocab) {
  const bool regression = classes == 0;
  if (!regression && (classes < 2 || classes > 256))
    throw Error("the model has " + std::to_string(classes) + " classes; loupe reads NumPy labels for 2 to 256");
  if (regression && outputs < 1) throw Error("a regression needs at least one output, got " + std::to_string(outputs));
  NpyFeatures r;
  const ArraySource src(dir);
  const bool has_test = src.test_arrays(val_split);
  const NpyArray x = src.read("x_train");
  r.x_type = npy_type_name(x.type);
  // y: a regression's float targets, else a classifier's labels.
  auto read_y = [&](const std::string& name, int64_t n, std::vector<float>& targets, std::vector<uint8_t>& labels) {
    if (regression) targets = targets_of(src.read(name), src.file(name), n, outputs);
    else labels = labels_of(src.read(name), src.file(name), n, classes);
  };
  // A dimension asked for as -1 (a model file's time length of None) is x_train's; x_test must have it too.
  r.sample = sample;
  for (size_t k = 0; k < r.sample.size(); ++k)
    if (r.sample[k] < 0 && x.shape.size() == sample.size() + 1) {
      if (x.shape[k + 1] < 1) throw Error(src.file("x_train") + ": sequences of no steps (" + dims_text(x.shape) + ")");
      r.sample[k] = x.shape[k + 1];
    }
  r.train_x = features_of(x, src.file("x_train"), r.sample, ids, vocab, r.n_train);
  read_y("y_train", r.n_train, r.train_targets, r.train_labels);
  if (has_test) {
    r.test_x = features_of(src.read("x_test"), src.file("x_test"), r.sample, ids, vocab, r.n_test);
    read_y("y_test", r.n_test, r.test_targets, r.test_labels);
  } else {
    hold_out(r, &NpyFeatures::train_x, &NpyFeatures::test_x, val_split, dir, "samples");
    split_rows(r.train_targets, r.test_targets, r.n_train + r.n_test, r.n_train);  // a regression's
  }
  if (r.n_train == 0 || r.n_test == 0) throw Error(dir + ": x_train or x_test holds no samples");
  return r;
}

}  // namespace loupe::data
