#include "core/file_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

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

void require_regular_output(const std::string& path, const std::string& what) {
  const std::string kind = what_else(path);
  if (!kind.empty())
    throw Error(what + " '" + path + "' is " + kind + "; give the path of a regular file (it is created or replaced)");
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

}  // namespace loupe
