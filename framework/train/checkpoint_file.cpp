#include "train/checkpoint_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/file_check.h"

namespace loupe {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'U', 'P', 'E', 'C', 'K', 'P'};
constexpr char kEndMarker[8] = {'L', 'O', 'U', 'P', 'E', 'E', 'N', 'D'};
constexpr size_t kHeader = sizeof kMagic + 4;        // magic + version
constexpr size_t kTrailer = 4 + sizeof kEndMarker;  // crc32 + end marker

// zlib's crc32 takes a 32-bit length, so large records go in 1 GiB pieces.
uint32_t crc_update(uint32_t crc, const void* data, size_t n) {
  auto p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

[[noreturn]] void io_fail(const std::string& what, const std::string& path, int err) {
  throw Error("cannot " + what + " checkpoint '" + path + "': " + std::strerror(err));
}

// The file being written. Where the filesystem allows (O_TMPFILE: ext4, xfs, btrfs, tmpfs), it
// has no name until it is complete: a process killed while writing (kill -9, power loss) leaves
// nothing behind, since the kernel frees an unnamed file when its last descriptor closes. It gets
// the temporary name just for the rename into place. Elsewhere it is a named temporary file from
// the start. Either way the name is removed on every path out of write_checkpoint_file except a
// successful rename, so a failed write never leaves debris beside the checkpoint.
struct TempFile {
  std::string path;  // "<checkpoint>.tmp.<pid>"
  FILE* f = nullptr;
  bool named = false, renamed = false;
  ~TempFile() {
    if (f) std::fclose(f);
    if (named && !renamed) std::remove(path.c_str());
  }
  // Opens an unnamed file in dir, or the named one; false (errno set) if neither can be made.
  bool open(const std::string& dir) {
#ifdef O_TMPFILE
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) {
      f = fdopen(fd, "wb");
      if (f) return true;
      ::close(fd);
    }
#endif
    f = std::fopen(path.c_str(), "wb");
    named = f != nullptr;
    return named;
  }
  // Gives the finished unnamed file its temporary name (a stale file of that name, left by a
  // dead process that had the same pid, is replaced); false (errno set) if it cannot be linked.
  bool link_name() {
    if (named) return true;
    std::remove(path.c_str());
    const std::string self = "/proc/self/fd/" + std::to_string(fileno(f));
    if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
        linkat(fileno(f), "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) != 0)
      return false;
    named = true;
    return true;
  }
};

// Streams little-endian fields to the file and keeps the running CRC, so the records are
// never copied into one big buffer.
class Writer {
 public:
  Writer(FILE* f, const std::string& path) : f_(f), path_(path) {}
  void raw(const void* p, size_t n) {
    if (n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) io_fail("write", path_, errno);
    crc_ = crc_update(crc_, p, n);
  }
  void le(uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    raw(b, n);
  }
  void u32(size_t v, const char* what) {
    if (v > std::numeric_limits<uint32_t>::max())
      throw Error("cannot write checkpoint '" + path_ + "': " + what + " is too large");
    le(v, 4);
  }
  void str(const std::string& s, const char* what) {
    u32(s.size(), what);
    raw(s.data(), s.size());
  }
  uint32_t crc() const { return crc_; }

 private:
  FILE* f_;
  const std::string& path_;
  uint32_t crc_ = 0;
};

// Bounds-checked view of the verified body: every length is checked against what remains
// before anything is allocated, so a bad length is an Error, not a huge allocation.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& who) : p_(p), n_(n), who_(who) {}
  size_t left() const { return n_ - pos_; }
  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left())
      throw Error(who_ + " is corrupt: " + what + " needs " + std::to_string(n) +
                  " bytes at offset " + std::to_string(pos_) + " but only " +
                  std::to_string(left()) + " remain");
    const uint8_t* p = p_ + pos_;
    pos_ += n;
    return p;
  }
  uint64_t le(int n, const std::string& what) { return load_le(take(n, what), n); }
  std::string str(const std::string& what) {
    const uint64_t n = le(4, what + " length");
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  const std::string& who_;
};

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  if (const std::string kind = what_else(path); !kind.empty())
    throw Error("checkpoint '" + path + "' is " + kind + ", not a checkpoint file");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT) throw Error("checkpoint '" + path + "' does not exist");
    io_fail("open", path, errno);
  }
  std::vector<uint8_t> data;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && st.st_size > 0) data.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
  const bool failed = std::ferror(f);
  const int err = errno;  // e.g. EISDIR when path is a directory
  std::fclose(f);
  if (failed) io_fail("read", path, err);
  return data;
}

}  // namespace

const CheckpointRecord* CheckpointFile::find(const std::string& name) const {
  for (const auto& r : records)
    if (r.name == name) return &r;
  return nullptr;
}

std::string CheckpointFile::meta_value(const std::string& key, const std::string& fallback) const {
  for (const auto& kv : meta)
    if (kv.first == key) return kv.second;
  return fallback;
}

namespace {
// Refuse rather than create directories: a typo in --checkpoint-dir should not silently scatter
// checkpoints somewhere new.
void check_directory(const std::string& path) {
  const std::string dir = parent_dir(path);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("cannot write checkpoint '" + path + "': directory '" + dir +
                "' does not exist; create it first");
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error("cannot write checkpoint '" + path + "': it is a directory; give a file name");
}

std::string temp_path(const std::string& path) { return path + ".tmp." + std::to_string(getpid()); }

// Removes "<path>.tmp.<pid>" files whose process no longer exists: a writer killed in the instant
// between naming its finished file and the rename, or on a filesystem without O_TMPFILE. A live
// process's file (another loupe saving to the same path) is left alone.
void remove_stale_temps(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string base = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = opendir(parent_dir(path).c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= base.size() || name.compare(0, base.size(), base) != 0) continue;
    const std::string digits = name.substr(base.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH)
      std::remove((parent_dir(path) + "/" + name).c_str());
  }
  closedir(d);
}

// The records and metadata, streamed with their CRC.
void write_body(FILE* f, const std::string& path, const CheckpointFile& ckpt) {
  Writer w(f, path);
  w.raw(kMagic, sizeof kMagic);
  w.le(kCheckpointVersion, 4);
  w.str(ckpt.model, "model name");
  w.u32(ckpt.meta.size(), "meta count");
  for (const auto& kv : ckpt.meta) {
    w.str(kv.first, "meta key");
    w.str(kv.second, "meta value");
  }
  w.u32(ckpt.records.size(), "record count");
  for (const auto& r : ckpt.records) {
    w.str(r.name, "record name");
    w.le(static_cast<uint32_t>(r.dtype), 4);
    w.u32(r.shape.size(), "record rank");
    for (int64_t d : r.shape) w.le(static_cast<uint64_t>(d), 8);
    w.le(r.bytes.size(), 8);
    w.raw(r.bytes.data(), r.bytes.size());
  }
  w.le(w.crc(), 4);
  w.raw(kEndMarker, sizeof kEndMarker);
  // The data must be on disk before the rename makes it visible under the real name.
  if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) io_fail("write", path, errno);
}
}  // namespace

void check_checkpoint_destination(const std::string& path) {
  check_directory(path);
  if (const int err = probe_new_file(parent_dir(path), temp_path(path))) io_fail("write", path, err);
}

CheckpointLock::CheckpointLock(const std::string& path) {
  const std::string lock = path + ".lock";
  require_regular_output(lock, "checkpoint lock");
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail("create the lock", lock, errno);
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) io_fail("lock", lock, err);
    std::string owner = n > 0 ? std::string(pid, size_t(n)) : std::string();
    owner.erase(owner.find_last_not_of(" \n") + 1);
    throw Error("another run" + (owner.empty() ? std::string() : " (pid " + owner + ")") + " is saving to '" + path +
                "' (it holds " + lock + "): two runs on one --save path overwrite each other's epochs; give this "
                "run another --save path, or wait for that one to end");
  }
  const std::string me = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // The pid only helps the message of a run that is refused; the lock itself holds.
  }
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) ::close(fd_);
}

void write_checkpoint_file(const std::string& path, const CheckpointFile& ckpt) {
  require_regular_output(path, "checkpoint");  // the rename below would replace a device or a FIFO
  check_directory(path);
  const std::string dir = parent_dir(path);
  std::set<std::string> names;
  for (const auto& r : ckpt.records)
    if (!names.insert(r.name).second)
      throw Error("cannot write checkpoint '" + path + "': record '" + r.name + "' appears twice");
  remove_stale_temps(path);

  TempFile tmp{temp_path(path)};
  if (!tmp.open(dir)) io_fail("write", path, errno);
  write_body(tmp.f, path, ckpt);
  if (!tmp.link_name()) {  // no /proc and no CAP_DAC_READ_SEARCH: write it again, named
    std::fclose(tmp.f);
    tmp.f = std::fopen(tmp.path.c_str(), "wb");
    if (!tmp.f) io_fail("write", path, errno);
    tmp.named = true;
    write_body(tmp.f, path, ckpt);
  }
  const int closed = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (closed != 0) io_fail("write", path, errno);
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0) io_fail("rename into", path, errno);
  tmp.renamed = true;
  // Best effort: fsync the directory so the rename itself survives a power loss.
  const int fd = open(dir.c_str(), O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

CheckpointFile read_checkpoint_file(const std::string& path) {
  const std::vector<uint8_t> data = read_file_bytes(path);
  const std::string who = "checkpoint '" + path + "'";
  const size_t n = data.size();

  // A file that starts like the magic but stops early was cut off; anything else is foreign.
  if (!std::equal(data.begin(), data.begin() + std::min(n, sizeof kMagic), kMagic))
    throw Error("'" + path + "' is not a loupe checkpoint (it does not start with LOUPECKP)");
  if (n < kHeader)
    throw Error(who + " is truncated: only " + std::to_string(n) + " bytes, shorter than the header");
  // The version comes before the trailer check: a newer format may end differently.
  const uint64_t version = load_le(data.data() + sizeof kMagic, 4);
  if (version > kCheckpointVersion)
    throw Error(who + " was written by a newer loupe (format version " + std::to_string(version) +
                "); this loupe reads version " + std::to_string(kCheckpointVersion));
  if (version != kCheckpointVersion)
    throw Error(who + " has unknown format version " + std::to_string(version) +
                "; this loupe reads version " + std::to_string(kCheckpointVersion));
  if (n < kHeader + kTrailer ||
      std::memcmp(data.data() + n - sizeof kEndMarker, kEndMarker, sizeof kEndMarker) != 0)
    throw Error(who + " is truncated: " + std::to_string(n) +
                " bytes and no end marker (was the write interrupted?)");

  // Verify the checksum before parsing, so nothing below ever trusts unverified bytes.
  const size_t body = n - kTrailer;
  const uint32_t stored = static_cast<uint32_t>(load_le(data.data() + body, 4));
  if (stored != crc_update(0, data.data(), body))
    throw Error(who + " is corrupt: its CRC32 does not match its contents");

  Reader r(data.data(), body, who);
  r.take(kHeader, "header");
  CheckpointFile ckpt;
  ckpt.model = r.str("model name");
  const uint64_t n_meta = r.le(4, "meta count");
  for (uint64_t i = 0; i < n_meta; ++i) {
    std::string key = r.str("meta key");
    ckpt.meta.emplace_back(std::move(key), r.str("meta value"));
  }
  const uint64_t n_records = r.le(4, "record count");
  for (uint64_t i = 0; i < n_records; ++i) {
    CheckpointRecord rec;
    rec.name = r.str("record name");
    const std::string what = "record '" + rec.name + "'";
    rec.dtype = static_cast<int32_t>(r.le(4, what + " dtype"));
    const uint64_t rank = r.le(4, what + " rank");
    const uint8_t* dims = r.take(rank * 8, what + " shape");
    for (uint64_t d = 0; d < rank; ++d)
      rec.shape.push_back(static_cast<int64_t>(load_le(dims + 8 * d, 8)));
    const uint64_t n_bytes = r.le(8, what + " size");
    const uint8_t* p = r.take(n_bytes, what + " data");
    rec.bytes.assign(p, p + n_bytes);
    ckpt.records.push_back(std::move(rec));
  }
  if (r.left() != 0)
    throw Error(who + " is corrupt: " + std::to_string(r.left()) +
                " unexpected bytes after the last record");
  return ckpt;
}

}  // namespace loupe
