// The host process's own CPU time and resident memory (Linux). The epoch report turns CPU seconds
// over wall seconds into host CPU utilisation (1.0 = one core busy).
#pragma once
#include <cstdint>
#include <map>
#include <optional>

namespace loupe::instrument {

// ok is false where /proc could not be read (not Linux, or a sandbox without /proc); the
// numbers are then NaN, so a caller that ignores ok prints nonsense rather than a plausible 0.
struct ProcessStats {
  // User + system time of all threads since the process started, from CLOCK_PROCESS_CPUTIME_ID
  // (nanoseconds): /proc/self/stat counts 10 ms ticks, which made a 20 ms epoch "0.0 cores".
  double cpu_seconds;
  double rss_bytes;       // resident set size now
  double rss_peak_bytes;  // the high-water mark (VmHWM) since the start or reset_rss_peak(); NaN if unread
  bool ok;
};

ProcessStats read_process_stats();

// ProcessStats::cpu_seconds alone, without reading /proc: -1 where the clock cannot be read.
double process_cpu_seconds();

// Starts a new high-water mark at the current RSS (writes "5" to /proc/self/clear_refs, Linux 4.0+),
// so a peak read later is the peak since now; false where it cannot (the mark then runs from the
// process's start: still a peak, and never below the one asked for).
bool reset_rss_peak();

// Each thread's time spent ready to run but waiting for a core (the run delay of
// /proc/self/task/TID/schedstat, in seconds), by thread id; empty where it cannot be read. Over an
// epoch, against the CPU time the threads got, it says how much of the machine other processes
// took: with one of 2 cores held by another process, mnist_mlp's threads waited about as long as
// they ran.
std::map<int, double> read_thread_run_delays();

// Of the time threads were ready to run (the CPU time they got plus the run delay), the share they
// waited: waited / (ran + waited); nothing when neither is positive.
std::optional<double> cpu_wait_share(double ran_seconds, double waited_seconds);

// The run delay the threads gathered between two reads of read_thread_run_delays, summed (a thread
// that started in between counts whole); -1 where `after` is empty (nothing could be read).
double run_delay_between(const std::map<int, double>& before, const std::map<int, double>& after);

// The idle time, in seconds, of the CPUs this process may run on (its affinity mask), summed:
// /proc/stat's idle and iowait. Over an interval, how many of those cores stood free; nothing
// where it cannot be read.
std::optional<double> read_idle_cpu_seconds();

// The largest CPU cache's size in bytes (sysconf; 0 when unknown).
int64_t last_level_cache_bytes();

}  // namespace loupe::instrument
