// HDF5 through libhdf5's C API (data/h5.h).
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/file_check.h"
#include "core/shape.h"
#include "data/h5.h"
#include "data/paths.h"

namespace loupe::data {
namespace {
// An HDF5 identifier closed with the call that fits its kind.
struct Id {
  hid_t h;
  herr_t (*close)(hid_t);
  Id(hid_t id, herr_t (*c)(hid_t)) : h(id), close(c) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (h >= 0) close(h);
  }
  operator hid_t() const { return h; }
};

// HDF5 prints its error stack on stderr by default; loupe's refusals say what went wrong instead.
void quiet() {
  static const bool done = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)done;
}
}  // namespace

struct H5File {
  std::string path;
  hid_t id = -1;
  ~H5File() {
    if (id >= 0) H5Fclose(id);
  }
};

namespace {
// The file opened by libhdf5 under `name` through `fapl`; `shown` names it in the refusal.
std::shared_ptr<H5File> opened(const std::string& shown, const std::string& name, hid_t fapl) {
  auto f = std::make_shared<H5File>();
  f->path = shown;
  f->id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl);
  if (f->id < 0)
    refuse_file(shown, "is not a readable HDF5 file (not HDF5 at all, or truncated or damaged; Keras's .h5 and .weights.h5 files are HDF5)");
  return f;
}
}  // namespace

std::shared_ptr<H5File> open_h5(const std::string& path) {
  ::close(open_data_file(path, "an HDF5 file"));
  quiet();
  return opened(path, path, H5P_DEFAULT);
}

bool h5_supported() { return true; }

std::shared_ptr<H5File> open_h5_image(const std::string& name, const std::vector<uint8_t>& bytes) {
  quiet();
  // The core driver over a copy of the image, never written back.
  const Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
      H5Pset_file_image(fapl, const_cast<uint8_t*>(bytes.data()), bytes.size()) < 0)
    refuse_file(name, "cannot be opened in memory by libhdf5");
  // The core driver refuses an image under the name of a file that exists: it gets one of its own.
  static int images = 0;
  return opened(name, "loupe image " + std::to_string(::getpid()) + " " + std::to_string(images++), fapl);
}

bool h5_has(H5File& f, const std::string& path) {
  if (path.empty()) return true;
  // Each link on the way must exist before the next is asked for (H5Lexists's rule).
  for (size_t slash = path.find('/'); ; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (H5Lexists(f.id, part.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
  }
}

namespace {
std::vector<std::string> read_strings(H5File& f, hid_t a, const std::string& what, int64_t n) {
  const Id type(H5Aget_type(a), H5Tclose);
  std::vector<std::string> out;
  int64_t total = 0;
  if (H5Tis_variable_str(type) > 0) {
    const Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem, H5T_VARIABLE);
    std::vector<char*> buf(size_t(n), nullptr);
    if (H5Aread(a, mem, buf.data()) < 0) refuse_file(f.path, what + " cannot be read as strings");
    for (char* s : buf) {
      out.emplace_back(s ? s : "");
      total += int64_t(out.back().size());
    }
    const Id space(H5Aget_space(a), H5Sclose);
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem, space, H5P_DEFAULT, buf.data());
#else
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, buf.data());  // Debian 12's libhdf5 is 1.10
#endif
  } else {
    const size_t size = H5Tget_size(type);
    if (size == 0 || int64_t(size) * n > kMaxH5Text) refuse_file(f.path, what + " holds more than " + std::to_string(kMaxH5Text) + " bytes of text");
    const Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem, size);
    H5Tset_strpad(mem, H5T_STR_NULLPAD);  // NumPy's fixed strings fill their width: no room for a NUL
    std::vector<char> buf(size * size_t(n));
    if (H5Aread(a, mem, buf.data()) < 0) refuse_file(f.path, what + " cannot be read as strings");
    for (int64_t i = 0; i < n; ++i) {
      const char* s = buf.data() + size_t(i) * size;
      out.emplace_back(s, std::find(s, s + size, '\0'));
    }
  }
  if (total > kMaxH5Text) refuse_file(f.path, what + " holds more than " + std::to_string(kMaxH5Text) + " bytes of text");
  return out;
}
}  // namespace

std::optional<std::vector<std::string>> h5_strings(H5File& f, const std::string& path, const std::string& name) {
  if (!h5_has(f, path)) return std::nullopt;
  const Id obj(H5Oopen(f.id, path.empty() ? "/" : path.c_str(), H5P_DEFAULT), H5Oclose);
  if (obj < 0 || H5Aexists(obj, name.c_str()) <= 0) return std::nullopt;
  const Id a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  const std::string what = "the attribute " + name + " of '/" + path + "'";
  const Id type(H5Aget_type(a), H5Tclose);
  const Id space(H5Aget_space(a), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (a < 0 || rank < 0 || rank > 1 || n < 0) refuse_file(f.path, what + " is not one string or a list of them");
  // An empty list is NumPy's empty float array (Keras 2 writes a layer without weights so).
  if (n == 0 && rank == 1) return std::vector<std::string>{};
  if (H5Tget_class(type) != H5T_STRING) refuse_file(f.path, what + " is not text");
  if (n > kMaxH5Strings) refuse_file(f.path, what + " holds " + std::to_string(n) + " strings, more than " + std::to_string(kMaxH5Strings));
  return read_strings(f, a, what, n);
}

namespace {
// How the dataset is stored, checked before libhdf5 reads it, since a damaged layout message can
// make it read past its buffers: compact (in the object header) or contiguous (as h5py writes
// Keras's weights) of exactly the shape's `bytes`, the contiguous ones inside the file; or in
// chunks of at most kMaxChunk bytes (libhdf5 allocates a whole chunk to read any of it); never a
// virtual dataset, whose data lie in other files.
constexpr uint64_t kMaxChunk = uint64_t(64) << 20;

void check_layout(H5File& f, hid_t d, const std::string& path, size_t element, uint64_t bytes) {
  const Id plist(H5Dget_create_plist(d), H5Pclose);
  const H5D_layout_t layout = H5Pget_layout(plist);
  const std::string where = "'/" + path + "' ";
  if (layout == H5D_COMPACT || layout == H5D_CONTIGUOUS) {
    const hsize_t stored = H5Dget_storage_size(d);
    if (stored != bytes) refuse_file(f.path, where + "stores " + std::to_string(stored) + " bytes for its shape's " + std::to_string(bytes));
    hsize_t file_size = 0;
    const haddr_t at = layout == H5D_CONTIGUOUS ? H5Dget_offset(d) : 0;
    if (layout == H5D_CONTIGUOUS && (H5Fget_filesize(f.id, &file_size) < 0 || at == HADDR_UNDEF || at > file_size || bytes > file_size - at))
      refuse_file(f.path, where + "lies past the end of the file");
    return;
  }
  if (layout != H5D_CHUNKED) refuse_file(f.path, where + "is stored in another file or an unknown layout");
  hsize_t chunk[H5S_MAX_RANK];
  const int rank = H5Pget_chunk(plist, H5S_MAX_RANK, chunk);
  uint64_t chunk_bytes = element;
  for (int i = 0; i < rank; ++i) chunk_bytes = chunk[i] > kMaxChunk / chunk_bytes ? kMaxChunk + 1 : chunk_bytes * chunk[i];
  if (rank < 1 || chunk_bytes > kMaxChunk)
    refuse_file(f.path, where + "is stored in chunks of more than " + std::to_string(kMaxChunk >> 20) + " MiB");
}
}  // namespace

std::vector<float> h5_floats(H5File& f, const std::string& path, const std::vector<int64_t>& shape) {
  if (!h5_has(f, path)) refuse_file(f.path, "has no dataset '/" + path + "'");
  const Id d(H5Dopen2(f.id, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (d < 0) refuse_file(f.path, "'/" + path + "' is not a dataset");
  const Id type(H5Dget_type(d), H5Tclose);
  const H5T_class_t c = H5Tget_class(type);
  if (c != H5T_FLOAT && c != H5T_INTEGER) refuse_file(f.path, "'/" + path + "' does not hold numbers");
  // A damaged type can claim elements of gigabytes, which libhdf5 would convert through buffers of
  // that size: numbers are 1 to 8 bytes.
  const size_t element = H5Tget_size(type);
  if (element != 1 && element != 2 && element != 4 && element != 8)
    refuse_file(f.path, "'/" + path + "' holds numbers of " + std::to_string(element) + " bytes; Keras's are 1 to 8");
  const Id space(H5Dget_space(d), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
  if (rank < 0 || H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0)
    refuse_file(f.path, "'/" + path + "' has no readable shape");
  const std::vector<int64_t> got(dims.begin(), dims.end());
  if (got != shape) refuse_file(f.path, "'/" + path + "' is " + dims_text(got) + " where the model's is " + dims_text(shape));
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  check_layout(f, d, path, element, uint64_t(n) * element);
  std::vector<float> out(static_cast<size_t>(n));
  if (n > 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    refuse_file(f.path, "'/" + path + "' cannot be read (a damaged file, or a filter this libhdf5 lacks)");
  return out;
}

std::vector<uint8_t> h5_image_of(const std::vector<std::string>& groups, const std::vector<H5Array>& arrays) {
  quiet();
  const Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0) throw Error("libhdf5 cannot make a file in memory");
  static int images = 0;
  const std::string name = "loupe new image " + std::to_string(::getpid()) + " " + std::to_string(images++);
  const Id file(H5Fcreate(name.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl), H5Fclose);
  const Id links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (file < 0 || links < 0 || H5Pset_create_intermediate_group(links, 1) < 0) throw Error("libhdf5 cannot make a file in memory");
  for (const std::string& g : groups)
    if (H5Lexists(file, g.c_str(), H5P_DEFAULT) <= 0 && Id(H5Gcreate2(file, g.c_str(), links, H5P_DEFAULT, H5P_DEFAULT), H5Gclose) < 0)
      throw Error("libhdf5 cannot make the group '/" + g + "'");
  for (const H5Array& a : arrays) {
    const std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
    const Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
    const Id d(H5Dcreate2(file, a.path.c_str(), H5T_IEEE_F32LE, space, links, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (space < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data) < 0)
      throw Error("libhdf5 cannot write the dataset '/" + a.path + "'");
  }
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw Error("libhdf5 cannot finish a file in memory");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  std::vector<uint8_t> bytes(size_t(std::max<ssize_t>(size, 0)));
  if (size <= 0 || H5Fget_file_image(file, bytes.data(), bytes.size()) != size) throw Error("libhdf5 cannot give a file's image");
  return bytes;
}

}  // namespace loupe::data
