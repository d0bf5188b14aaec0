#include "instrument/host_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

namespace loupe::instrument {

ProcessStats read_process_stats() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProcessStats out{nan, nan, false};

  // /proc/self/stat: "pid (comm) state ppid ...", utime and stime are fields 14 and 15 in clock
  // ticks. comm may contain spaces and ')', so parse from the last ')'.
  std::ifstream stat("/proc/self/stat");
  std::string line((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 13 && rest >> field; ++i) {}  // fields 3..13: state .. cmajflt
  if (!(rest >> utime >> stime)) return out;

  // /proc/self/statm: "size resident shared ..." in pages.
  std::ifstream statm("/proc/self/statm");
  unsigned long long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return out;

  long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  if (ticks <= 0 || page <= 0) return out;
  out.cpu_seconds = double(utime + stime) / double(ticks);
  out.rss_bytes = double(resident) * double(page);
  out.ok = true;
  return out;
}

std::map<int, double> read_thread_run_delays() {
  std::map<int, double> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(task.path() / "schedstat");  // "ns on a CPU, ns waiting on a run queue, slices"
    unsigned long long ran = 0, waited = 0;
    if (!(f >> ran >> waited)) continue;  // a thread that ended meanwhile
    out[std::atoi(task.path().filename().c_str())] = double(waited) * 1e-9;
  }
  return out;
}

std::optional<double> cpu_wait_share(double ran_seconds, double waited_seconds) {
  if (!(ran_seconds >= 0 && waited_seconds >= 0 && ran_seconds + waited_seconds > 0)) return std::nullopt;
  return waited_seconds / (ran_seconds + waited_seconds);
}

}  // namespace loupe::instrument
