#include "core/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/error.h"

namespace loupe {
namespace {

// A value of a file as the first number in it: -1 when it is missing or "max" (no limit).
double read_number(const std::string& path, const std::string& key = "") {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    // "inactive_file 4096" in memory.stat, "VmSize:\t  1024 kB" in /proc/self/status
    if (!key.empty() && (line.rfind(key, 0) != 0 || line.size() <= key.size() || !std::isspace((unsigned char)line[key.size()])))
      continue;
    const std::string value = line.substr(key.size());
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    return end == value.c_str() ? -1 : v;
  }
  return -1;
}

// A limit less a usage less its reclaimable page cache; -1 when there is no limit.
double headroom(double limit, double usage, double inactive_file) {
  if (limit < 0 || usage < 0) return -1;
  return std::max(0.0, limit - std::max(0.0, usage - std::max(0.0, inactive_file)));
}


double least_known(double a, double b) { return a < 0 ? b : b < 0 ? a : std::min(a, b); }


double address_space_free() {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
  const double mapped = read_number("/proc/self/status", "VmSize:") * 1024;  // kB
  return mapped < 0 ? -1 : std::max(0.0, double(rl.rlim_cur) - mapped);
}


}  // namespace

// "3.1 GB", "512 MB": decimal units, as the message reads.
std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.0f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f kB", b / 1e3);
  return buf;
}

double cgroup_memory_free(const std::string& proc_cgroup, const std::string& cgroup_root) {
  // As cores_within_cgroups (core/thread_pool.h): the cgroup and each above it may hold a limit.
  double free = -1;
  std::ifstream groups(proc_cgroup);
  for (std::string line; std::getline(groups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const bool v2 = line.rfind("0::", 0) == 0, v1 = controllers.find(",memory,") != std::string::npos;
    if (!v2 && !v1) continue;
    for (std::string path = line.substr(b + 1);; path = path.substr(0, path.rfind('/'))) {
      const std::string dir = (v2 ? cgroup_root : cgroup_root + "/memory") + path + "/";
      if (v2)
        free = least_known(free, headroom(read_number(dir + "memory.max"), read_number(dir + "memory.current"),
                                          read_number(dir + "memory.stat", "inactive_file")));
      else  // v1 writes "no limit" as a number near 2^63, larger than any machine: no special case
        free = least_known(free, headroom(read_number(dir + "memory.limit_in_bytes"), read_number(dir + "memory.usage_in_bytes"),
                                          read_number(dir + "memory.stat", "total_inactive_file")));
      if (path.empty() || path == "/") break;
    }
  }
  return free;
}

double host_memory_free() {
  const double kb = read_number("/proc/meminfo", "MemAvailable:");
  double free = kb < 0 ? -1 : kb * 1024;
  free = least_known(free, cgroup_memory_free("/proc/self/cgroup", "/sys/fs/cgroup"));
  return least_known(free, address_space_free());  // tests and `ulimit -v` set RLIMIT_AS
}


std::string host_memory_shortfall(double bytes, const std::string& what, const std::string& fix) {
  const double free = host_memory_free();
  if (free < 0 || bytes <= free) return "";
  return what + " needs about " + bytes_text(bytes) + ", more than the " + bytes_text(free) + " this machine has free" +
         (fix.empty() ? "" : ": " + fix);
}

void require_host_memory(double bytes, const std::string& what, const std::string& fix) {
  if (std::string why = host_memory_shortfall(bytes, what, fix); !why.empty()) throw Error(why);
}

}  // namespace loupe
