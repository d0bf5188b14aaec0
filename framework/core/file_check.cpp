#include "core/file_check.h"

#include <sys/stat.h>

#include <cerrno>

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

}  // namespace loupe
