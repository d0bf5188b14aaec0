// .npz archives through libzip (data/npy.h): members inflated in pieces, so memory follows what a
// member really holds, never what its header declares (a zip bomb's few bytes declare gigabytes).
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "data/npy.h"

namespace loupe::data {

struct NpzFile {
  std::string path;
  zip_t* zip = nullptr;
  ~NpzFile() {
    if (zip) zip_discard(zip);
  }
};

namespace {
constexpr uint64_t kMaxMember = uint64_t(8) << 30;

std::string zip_message(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string m = zip_error_strerror(&e);
  zip_error_fini(&e);
  return m;
}
}  // namespace

std::shared_ptr<NpzFile> open_npz(const std::string& path) {
  auto z = std::make_shared<NpzFile>();
  z->path = path;
  int err = 0;
  z->zip = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z->zip) throw Error(path + ": not a .npz file (np.savez writes a zip archive): " + zip_message(err));
  return z;
}

std::optional<NpyArray> npz_array(NpzFile& z, const std::string& name) {
  const std::string member = name + ".npy", where = z.path + ": " + member;
  const zip_int64_t idx = zip_name_locate(z.zip, member.c_str(), 0);
  if (idx < 0) return std::nullopt;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z.zip, zip_uint64_t(idx), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    throw Error(where + ": the archive does not say its size");
  if (st.size > kMaxMember)
    throw Error(where + ": " + std::to_string(st.size) + " bytes, more than loupe reads from one member (8 GiB)");
  const std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z.zip, zip_uint64_t(idx), 0), zip_fclose);
  if (!f) throw Error(where + ": cannot be read: " + zip_strerror(z.zip));
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> piece(1 << 20);
  for (;;) {
    const zip_int64_t got = zip_fread(f.get(), piece.data(), piece.size());
    if (got < 0) throw Error(where + ": cannot be inflated: " + zip_file_strerror(f.get()));
    if (got == 0) break;
    if (bytes.size() + uint64_t(got) > st.size)  // stopped before it grows further
      throw Error(where + ": holds more bytes than the " + std::to_string(st.size) + " the archive declares");
    bytes.insert(bytes.end(), piece.begin(), piece.begin() + got);
    if (bytes.size() < 6 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
      return parse_npy(where, bytes);  // not a .npy: its refusal, without inflating the rest
  }
  if (bytes.size() != st.size)
    throw Error(where + ": holds " + std::to_string(bytes.size()) + " bytes where the archive declares " +
                std::to_string(st.size));
  return parse_npy(where, bytes);
}

bool npz_has(NpzFile& z, const std::string& name) { return zip_name_locate(z.zip, (name + ".npy").c_str(), 0) >= 0; }

bool npz_supported() { return true; }

}  // namespace loupe::data
