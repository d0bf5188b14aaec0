// .npz archives through libzip (data/npy.h): a member's .npy header is inflated first, its size
// checked against the archive's and against its compressed size (a zip bomb's few bytes declare
// gigabytes), and only then is its data allocated, once, and inflated into it.
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/file_check.h"
#include "data/npy.h"
#include "data/paths.h"

namespace loupe::data {

struct NpzFile {
  std::string path;
  uint64_t size = 0;  // the archive's bytes: no member's compressed bytes can be more
  zip_t* zip = nullptr;
  ~NpzFile() {
    if (zip) zip_discard(zip);
  }
};

namespace {
constexpr uint64_t kMaxMember = uint64_t(8) << 30;

// What a member may inflate to, checked against its compressed size before its data are inflated:
// a size over both the floor and the ratio times the compressed size is refused, as the gzip IDX
// reader refuses one (data/idx.cpp; docs/reliability.md, "Bounded memory on hostile files"). The
// arrays np.savez_compressed writes compress a few times (images, labels, ids); a member of zeros
// compresses 1,000x (deflate) to a million times (bzip2). The floor lets any small array through.
constexpr uint64_t kInflateFloor = uint64_t(64) << 20;
constexpr uint64_t kInflateRatio = 50;

std::string zip_message(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string m = zip_error_strerror(&e);
  zip_error_fini(&e);
  return m;
}

using ZipFile = std::unique_ptr<zip_file_t, int (*)(zip_file_t*)>;

// Up to `n` bytes of the member into `to`, fewer only at its end; how many.
size_t read_member(zip_file_t* f, uint8_t* to, size_t n, const std::string& where) {
  size_t have = 0;
  while (have < n) {
    const zip_int64_t got = zip_fread(f, to + have, std::min<size_t>(n - have, size_t(1) << 30));
    if (got < 0) throw Error(where + ": cannot be inflated: " + zip_file_strerror(f));
    if (got == 0) break;
    have += size_t(got);
  }
  return have;
}

// The member's .npy header, inflated alone: its first 12 bytes, then the rest of the header.
std::vector<uint8_t> read_header(zip_file_t* f, uint64_t size, const std::string& where) {
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(size, 12)));
  head.resize(read_member(f, head.data(), head.size(), where));
  if (head.size() < 12) return head;  // npy_declared refuses it (a header is 64 bytes or more)
  const size_t want = npy_header_bytes(where, head.data(), head.size());
  if (want > size) throw Error(where + ": truncated in the header");
  const size_t had = head.size();
  head.resize(want);
  head.resize(had + read_member(f, head.data() + had, want - had, where));
  return head;
}

// Why the member of `size` bytes and `compressed` bytes is not inflated, or "".
std::string implausible_member(uint64_t size, uint64_t compressed) {
  if (size <= kInflateFloor || size <= kInflateRatio * compressed) return "";
  return with_commas(size) + " bytes from " + short_size(compressed) + " compressed (" +
         with_commas(size / std::max<uint64_t>(compressed, 1)) + " times); loupe inflates a member to at most " +
         std::to_string(kInflateRatio) + " times its compressed size (or 64 MiB): a damaged or hostile archive "
         "(np.savez_compressed's arrays compress far less; np.savez stores them whole)";
}
}  // namespace

namespace {
// The archive at `path` (`kind`: "a .npz file") opened by libzip; `not_it` ends the refusal of one
// that is not a zip archive.
std::shared_ptr<NpzFile> open_archive(const std::string& path, const std::string& kind, const std::string& not_it) {
  auto z = std::make_shared<NpzFile>();
  z->path = path;
  const int fd = open_data_file(path, kind);  // the type first: opening a FIFO blocks
  struct stat st {};
  if (fstat(fd, &st) == 0) z->size = uint64_t(st.st_size);
  int err = 0;
  z->zip = zip_fdopen(fd, 0, &err);  // takes fd, but only when it succeeds
  if (!z->zip) {
    ::close(fd);
    throw Error(path + ": not " + kind + " " + not_it + ": " + zip_message(err));
  }
  return z;
}

// The sizes of member `idx` (`where` names it), checked before it is opened: both declared, the
// compressed ones inside the archive (else a stored member's size is the archive's word alone),
// at most `cap` bytes inflated.
zip_stat_t checked_member(NpzFile& z, zip_int64_t idx, const std::string& where, uint64_t cap, const std::string& cap_why) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z.zip, zip_uint64_t(idx), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
      !(st.valid & ZIP_STAT_COMP_SIZE))
    throw Error(where + ": the archive does not say its size");
  if (st.comp_size > z.size)
    throw Error(where + ": " + with_commas(st.comp_size) + " compressed bytes declared, more than the archive's " +
                with_commas(z.size) + ": a damaged archive");
  if (st.size > cap) throw Error(where + ": " + with_commas(st.size) + " bytes, more than loupe reads from " + cap_why);
  return st;
}
}  // namespace

std::shared_ptr<NpzFile> open_npz(const std::string& path) {
  return open_archive(path, "a .npz file", "(np.savez writes a zip archive)");
}

// The member's header is inflated first and checked against the size the archive declares and its
// compressed size; then its data are allocated once, at the header's size, and inflated into it,
// stopping there: a member holding more (or less) than it declares is refused.
std::optional<NpyArray> npz_array(NpzFile& z, const std::string& name) {
  const std::string member = name + ".npy", where = z.path + ": " + member;
  const zip_int64_t idx = zip_name_locate(z.zip, member.c_str(), 0);
  if (idx < 0) return std::nullopt;
  const zip_stat_t st = checked_member(z, idx, where, kMaxMember, "one member (8 GiB)");
  const ZipFile f(zip_fopen_index(z.zip, zip_uint64_t(idx), 0), zip_fclose);
  if (!f) throw Error(where + ": cannot be read: " + zip_strerror(z.zip));
  const std::vector<uint8_t> head = read_header(f.get(), st.size, where);
  NpyArray a = npy_declared(where, head, st.size);
  if (const std::string why = implausible_member(st.size, st.comp_size); !why.empty()) throw Error(where + ": " + why);
  const size_t want = size_t(st.size) - head.size();
  require_host_memory(double(want), where, "its data do not fit in this machine's memory");
  a.bytes.reserve(want);  // pages are touched only as the data arrive
  size_t have = 0;
  while (have < want) {
    const size_t step = std::min(want - have, size_t(1) << 24);
    a.bytes.resize(have + step);
    const size_t got = read_member(f.get(), a.bytes.data() + have, step, where);
    have += got;
    if (got < step) break;  // its end
  }
  uint8_t more = 0;
  if (have < want)
    throw Error(where + ": holds " + with_commas(head.size() + have) + " bytes where the archive declares " +
                with_commas(st.size));
  if (read_member(f.get(), &more, 1, where) != 0)
    throw Error(where + ": holds more bytes than the " + with_commas(st.size) + " the archive declares");
  return a;
}

std::optional<std::vector<uint8_t>> zip_member(const std::string& path, const std::string& member, uint64_t cap,
                                               const std::string& kind) {
  const std::shared_ptr<NpzFile> z = open_archive(path, kind, "(a zip archive)");
  const std::string where = path + ": " + member;
  const zip_int64_t idx = zip_name_locate(z->zip, member.c_str(), 0);
  if (idx < 0) return std::nullopt;
  const zip_stat_t ms = checked_member(*z, idx, where, cap, "it (" + short_size(cap) + ")");
  if (const std::string why = implausible_member(ms.size, ms.comp_size); !why.empty()) throw Error(where + ": " + why);
  const ZipFile f(zip_fopen_index(z->zip, zip_uint64_t(idx), 0), zip_fclose);
  if (!f) throw Error(where + ": cannot be read: " + zip_strerror(z->zip));
  std::vector<uint8_t> bytes(size_t(ms.size));
  uint8_t more = 0;
  if (read_member(f.get(), bytes.data(), bytes.size(), where) != bytes.size())
    throw Error(where + ": holds fewer bytes than the " + with_commas(ms.size) + " the archive declares");
  if (read_member(f.get(), &more, 1, where) != 0)
    throw Error(where + ": holds more bytes than the " + with_commas(ms.size) + " the archive declares");
  return bytes;
}

bool npz_has(NpzFile& z, const std::string& name) { return zip_name_locate(z.zip, (name + ".npy").c_str(), 0) >= 0; }

bool npz_supported() { return true; }

void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint8_t>>>& members) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!z) throw Error(path + ": cannot be written as a zip archive: " + zip_message(code));
  const auto fail = [&](const std::string& what) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    throw Error(path + ": " + what + ": " + why);
  };
  for (const auto& [name, bytes] : members) {
    // The buffers outlive zip_close, which reads them; libzip does not free them (freep 0).
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    if (!src) fail("cannot take " + name);
    const zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      fail("cannot add " + name);
    }
    if (zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_STORE, 0) < 0) fail("cannot store " + name);
  }
  if (zip_close(z) < 0) fail("cannot be written");
}

}  // namespace loupe::data
