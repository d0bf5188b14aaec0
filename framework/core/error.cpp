#include "core/error.h"

#include <cstring>

namespace loupe::detail {

void fail(const char* file, int line, const std::string& msg) {
  // Keep only the path below framework/ etc.: the message is for users, not for our build tree.
  const char* short_file = file;
  for (const char* key : {"framework/", "models/", "data/", "cli/"}) {
    if (const char* p = std::strstr(file, key)) { short_file = p; break; }
  }
  throw Error(msg + "  [" + short_file + ":" + std::to_string(line) + "]");
}

}  // namespace loupe::detail
