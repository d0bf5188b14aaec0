#include "instrument/host_stats.h"

#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

namespace loupe::instrument {

double process_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return -1;
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

ProcessStats read_process_stats() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProcessStats out{nan, nan, nan, false};
  const double cpu = process_cpu_seconds();
  if (cpu < 0) return out;

  // /proc/self/statm: "size resident shared ..." in pages.
  std::ifstream statm("/proc/self/statm");
  unsigned long long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return out;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return out;
  out.cpu_seconds = cpu;
  out.rss_bytes = double(resident) * double(page);
  out.ok = true;

  // /proc/self/status: "VmHWM:    1234 kB", the peak resident set.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) {
      out.rss_peak_bytes = std::strtod(line.c_str() + 6, nullptr) * 1024.0;
      break;
    }
  return out;
}

bool reset_rss_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return bool(f);
}

// Plain system calls: a process of loupe on a GPU host has many threads (131 on a 64-core host:
// OpenBLAS's and OpenMP's pools, CUDA's, NCCL's), and a stream per file made this read 1.5x as long.
std::map<int, double> read_thread_run_delays() {
  std::map<int, double> out;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return out;
  char path[300], text[128];  // a d_name holds up to 255 bytes
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // a thread that ended meanwhile
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) continue;
    text[n] = '\0';
    unsigned long long ran = 0, waited = 0;  // "ns on a CPU, ns waiting on a run queue, slices"
    if (std::sscanf(text, "%llu %llu", &ran, &waited) != 2) continue;
    out[std::atoi(e->d_name)] = double(waited) * 1e-9;
  }
  closedir(dir);
  return out;
}

std::optional<double> cpu_wait_share(double ran_seconds, double waited_seconds) {
  if (!(ran_seconds >= 0 && waited_seconds >= 0 && ran_seconds + waited_seconds > 0)) return std::nullopt;
  return waited_seconds / (ran_seconds + waited_seconds);
}

double run_delay_between(const std::map<int, double>& before, const std::map<int, double>& after) {
  if (after.empty()) return -1;
  double waited = 0;
  for (const auto& [tid, d] : after) {
    const auto b = before.find(tid);
    waited += std::max(0.0, d - (b == before.end() ? 0.0 : b->second));
  }
  return waited;
}

std::optional<double> read_idle_cpu_seconds() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return std::nullopt;
  const long hz = sysconf(_SC_CLK_TCK);
  std::ifstream stat("/proc/stat");
  if (!stat || hz <= 0) return std::nullopt;
  // "cpuN user nice system idle iowait irq softirq steal ...", in clock ticks; "cpu " is the sum.
  unsigned long long ticks = 0;
  bool any = false;
  for (std::string line; std::getline(stat, line);) {
    if (line.rfind("cpu", 0) != 0) continue;
    int cpu = -1;
    unsigned long long user, nice, system, idle, iowait;
    if (std::sscanf(line.c_str(), "cpu%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle, &iowait) != 6)
      continue;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mine)) continue;
    ticks += idle + iowait;
    any = true;
  }
  if (!any) return std::nullopt;
  return double(ticks) / double(hz);
}

int64_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    long v = sysconf(name);
    if (v > 0) return v;
  }
  return 0;
}

}  // namespace loupe::instrument
