#include "core/file_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"

namespace loupe {

std::string what_else(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno == ELOOP ? "a loop of symbolic links" : "";
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "an unusual file (neither a regular file nor a device)";
}

std::string directory_problem(const std::string& path, const std::string& what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return errno == ELOOP ? "is a loop of symbolic links, not a directory" : what + " not found";
  if (S_ISDIR(st.st_mode)) return "";
  const std::string kind = what_else(path);
  return "is " + (kind.empty() ? std::string("a regular file") : kind) + ", not a directory";
}

void require_regular_output(const std::string& path, const std::string& what) {
  const std::string kind = what_else(path);
  if (!kind.empty())
    throw Error(what + " '" + path + "' is " + kind + "; give the path of a regular file (it is created or replaced)");
}

int probe_new_file(const std::string& dir, const std::string& fallback) {
#ifdef O_TMPFILE
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  // EACCES or EROFS is the directory's answer; other errors may be the filesystem lacking O_TMPFILE.
  if (errno == EACCES || errno == EROFS || errno == ENOENT || errno == ENOTDIR || errno == EDQUOT) return errno;
#endif
  // Exclusively: never over someone's file. One already there (a dead run's, of the same name) is
  // no refusal of the directory, and is left as it is.
  const int made = ::open(fallback.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (made < 0) return errno == EEXIST ? 0 : errno;
  ::close(made);
  ::unlink(fallback.c_str());
  return 0;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

namespace {

// what_else's words, with a regular file's.
std::string kind_of(const std::string& path) {
  const std::string kind = what_else(path);
  return kind.empty() ? "a regular file" : kind;
}

[[noreturn]] void refuse_output(const std::string& option, const std::string& path, const std::string& why) {
  throw Error(option + ": cannot write '" + path + "': " + why);
}

// The nearest of `path` and its ancestors that exists (ENOENT, or ENOTDIR below a file, above it).
std::string nearest_existing(std::string path) {
  struct stat st;
  while (stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR) && path != "." && path != "/")
    path = parent_dir(path);
  return path;
}

// Why the directory `dir` of `path` cannot take a new file, or "".
std::string refused_directory(const std::string& dir, const std::string& path) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    const std::string up = nearest_existing(dir);
    if (err == ENOTDIR || (stat(up.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)))
      return "'" + up + "' is " + kind_of(up) + ", not a directory";
    return err == ENOENT ? "its directory does not exist" : "its directory '" + dir + "': " + std::strerror(err);
  }
  if (!S_ISDIR(st.st_mode)) return "'" + dir + "' is " + kind_of(dir) + ", not a directory";
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const int err = probe_new_file(dir, dir + "/." + base + ".probe." + std::to_string(getpid()));
  if (err == 0) return "";
  return "its directory '" + dir + "' takes no new file (" + std::strerror(err) + ")";
}

}  // namespace

void refuse_file(const std::string& file, const std::string& why) { throw Error(file + ": " + why); }

void check_output_file(const std::string& path, const std::string& option) {
  if (const std::string kind = what_else(path); !kind.empty())
    refuse_output(option, path, "it is " + kind + "; give the path of a regular file (it is created or replaced)");
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    // No O_TRUNC: the check changes nothing; O_NONBLOCK against a FIFO put there meanwhile.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) refuse_output(option, path, std::strerror(errno));
    ::close(fd);
    return;
  }
  if (errno != ENOENT && errno != ENOTDIR) refuse_output(option, path, std::strerror(errno));
  if (const std::string why = refused_directory(parent_dir(path), path); !why.empty()) refuse_output(option, path, why);
}

void check_output_directory(const std::string& dir, const std::string& option) {
  struct stat st;
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (stat(d.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) refuse_output(option, dir, "it is " + kind_of(d) + ", not a directory");
    const int err = probe_new_file(d, d + "/.loupe.probe." + std::to_string(getpid()));
    if (err != 0) refuse_output(option, dir, std::string("the directory takes no new file (") + std::strerror(err) + ")");
    return;
  }
  // Missing: the writer creates it and its missing parents, in the nearest ancestor that exists.
  const std::string up = nearest_existing(d);
  if (stat(up.c_str(), &st) != 0) refuse_output(option, dir, "'" + up + "': " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) refuse_output(option, dir, "'" + up + "' is " + kind_of(up) + ", not a directory");
  const int err = probe_new_file(up, up + "/.loupe.probe." + std::to_string(getpid()));
  if (err != 0) refuse_output(option, dir, "it cannot be created in '" + up + "' (" + std::strerror(err) + ")");
}

namespace {

// An open descriptor, closed on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

template <class Bytes>
bool read_capped_into(const std::string& path, uint64_t cap, Bytes* out, uint64_t* size) {
  out->clear();
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(f.fd, &st) != 0) throw Error(path + ": read error: " + std::strerror(errno));
  const uint64_t stated = st.st_size > 0 ? uint64_t(st.st_size) : 0;
  if (stated > cap) {
    *size = stated;
    return false;
  }
  // The stated size exactly, so that a file that keeps it is read with one allocation; a file
  // that reports none grows its buffer as it is read, never past cap + 1.
  out->resize(size_t(stated ? stated : std::min<uint64_t>(cap + 1, 1 << 16)));
  size_t have = 0;
  for (;;) {
    if (have > cap) {  // more than it said, or it said nothing
      out->clear();
      out->shrink_to_fit();
      *size = have;
      return false;
    }
    if (have == out->size()) {
      char probe;  // the end of the file, or more than it said: one byte tells, without growing
      const ssize_t n = ::read(f.fd, &probe, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(path + ": read error: " + std::strerror(errno));
      if (n == 0) break;
      out->resize(size_t(std::min<uint64_t>(cap + 1, std::max<uint64_t>(2 * have, 1 << 16))));
      (*out)[have++] = static_cast<typename Bytes::value_type>(probe);
      continue;
    }
    const ssize_t n = ::read(f.fd, out->data() + have, out->size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": read error: " + std::strerror(errno));
    if (n == 0) break;
    have += size_t(n);
  }
  out->resize(have);
  *size = have;
  return true;
}

}  // namespace

bool read_capped(const std::string& path, uint64_t cap, std::string* out, uint64_t* size) {
  return read_capped_into(path, cap, out, size);
}

bool read_capped(const std::string& path, uint64_t cap, std::vector<uint8_t>* out, uint64_t* size) {
  return read_capped_into(path, cap, out, size);
}

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string short_size(uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KB", "MB", "GB", "TB", "PB", "EB"};
  double v = double(bytes) / 1000;
  int u = 0;
  while (v >= 999.95 && u < 5) v /= 1000, ++u;
  char s[32];
  std::snprintf(s, sizeof s, v < 9.95 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return s;
}

void write_whole_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !wrote) throw Error("cannot write '" + path + "': " + std::strerror(wrote ? errno : err));
}

namespace {

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool dir = false;
  bool operator==(const FileId& b) const { return dev == b.dev && ino == b.ino; }
};

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino, S_ISDIR(st.st_mode)};
}

// How deep `path` lies inside `folder` (1: directly in it; 2 or more: in a folder of it), 0 when
// it does not: its real parents (symbolic links resolved, also for a path not there yet) compared
// with the folder by device and inode.
int depth_inside(const std::string& path, const FileId& folder) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) return 0;
  int depth = 1;
  for (std::filesystem::path p = real.parent_path(); !p.empty(); p = p.parent_path(), ++depth) {
    if (file_id(p.string()) == std::optional<FileId>(folder)) return depth;
    if (p == p.root_path()) break;
  }
  return 0;
}

// A name a data set's reader takes from the top of its folder (docs/data.md). Other files there (a
// checkpoint, a metrics file) are no input.
bool read_as_data(const std::string& path) {
  const std::string n = std::filesystem::path(path).filename().string();
  for (const std::string ext : {".npy", ".npz", "-ubyte", "-ubyte.gz", ".bin", ".txt"})
    if (n.size() >= ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

}  // namespace

void check_inputs_kept(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  for (const OutputPath& o : outputs) {
    const std::optional<FileId> out = file_id(o.path);
    for (const InputPath& in : inputs) {
      const std::optional<FileId> id = file_id(in.path);
      if (!id || (!in.spare.empty() && o.option == in.spare)) continue;
      const std::string name = in.what + (!in.data ? "" : id->dir ? " folder" : " file") + " '" + in.path + "'";
      std::string is;
      if (out && *out == *id) {
        is = name;
      } else if (id->dir) {
        const int depth = depth_inside(o.path, *id);
        if (depth >= 2 || (depth == 1 && (o.folder || read_as_data(o.path)))) is = "inside " + name;
      }
      if (!is.empty())
        throw Error(o.option + " '" + o.path + "' is " + is + ": loupe does not write over its inputs; give " +
                    o.option + " another path");
    }
  }
}

}  // namespace loupe
