// One search order for the data sets (paths.h).
#include "data/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/file_check.h"
#include "core/knobs.h"

namespace fs = std::filesystem;

namespace loupe::data {

std::vector<std::string> search_places(const std::string& rel) {
  std::vector<std::string> places;
  if (const std::optional<std::string> root = knobs::text("LOUPE_DATA")) places.push_back((fs::path(*root) / rel).string());
  const char* home = std::getenv("HOME");
  if (home && *home) places.push_back((fs::path(home) / ".cache/loupe" / rel).string());
  places.push_back((fs::path("data") / rel).string());
  return places;
}

std::optional<std::string> first_usable(const std::vector<std::string>& places,
                                        const std::function<bool(const std::string&)>& usable) {
  for (const std::string& p : places)
    if (usable(p)) return p;
  return std::nullopt;
}

std::string list_places(const std::vector<std::string>& places) {
  std::string s;
  for (const std::string& p : places) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string not_found(const std::string& what, const std::vector<std::string>& places, const std::string& how) {
  return what + " was not found (looked in " + list_places(places) + ").\n" + how;
}

namespace {
[[noreturn]] void refuse_data_file(const std::string& path, const std::string& what, const std::string& kind) {
  throw Error(path + " is " + what + ", not " + kind + "; give a regular file");
}
}  // namespace

int open_data_file(const std::string& path, const std::string& kind) {
  const auto refuse = [&](const std::string& what) { refuse_data_file(path, what, kind); };
  if (const std::string what = what_else(path); !what.empty()) refuse(what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) refuse("a loop of symbolic links");
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse("no longer a regular file (it changed while loupe opened it)");
  }
  // Reads block again as usual: a regular file's never wait, and the flag is no part of them.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace loupe::data
