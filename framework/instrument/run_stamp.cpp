#include "instrument/run_stamp.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

namespace loupe::instrument {

std::string cpu_model_in(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? "" : line.substr(first);
  }
  return "";
}

namespace {
RunStamp make_stamp() {
  RunStamp s;
  // The id: random_device mixed with the clock and the pid, in case random_device is deterministic.
  std::random_device rd;
  const uint64_t now = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  std::mt19937_64 gen((uint64_t(rd()) << 32 ^ rd()) ^ now ^ (uint64_t(getpid()) << 17));
  char id[16];
  std::snprintf(id, sizeof id, "%012llx", (unsigned long long)(gen() & 0xffffffffffffULL));
  s.run_id = id;
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  s.started_at = when;
  std::ifstream f("/proc/cpuinfo");
  std::stringstream text;
  text << f.rdbuf();
  s.cpu_model = cpu_model_in(text.str());
  return s;
}
}  // namespace

const RunStamp& run_stamp() {
  static const RunStamp s = make_stamp();
  return s;
}

}  // namespace loupe::instrument
