// The host process's own CPU time and resident memory, read from /proc (Linux). The epoch report
// turns CPU seconds over wall seconds into host CPU utilisation (1.0 = one core busy).
#pragma once
#include <map>
#include <optional>

namespace loupe::instrument {

// ok is false where /proc could not be read (not Linux, or a sandbox without /proc); the
// numbers are then NaN, so a caller that ignores ok prints nonsense rather than a plausible 0.
struct ProcessStats {
  double cpu_seconds;  // user + system time of all threads since the process started
  double rss_bytes;    // resident set size now
  bool ok;
};

ProcessStats read_process_stats();

// Each thread's time spent ready to run but waiting for a core (the run delay of
// /proc/self/task/TID/schedstat, in seconds), by thread id; empty where it cannot be read. Over an
// epoch, against the CPU time the threads got, it says how much of the machine other processes
// took: with one of 2 cores held by another process, mnist_mlp's threads waited about as long as
// they ran.
std::map<int, double> read_thread_run_delays();

// Of the time threads were ready to run (the CPU time they got plus the run delay), the share they
// waited: waited / (ran + waited); nothing when neither is positive.
std::optional<double> cpu_wait_share(double ran_seconds, double waited_seconds);

}  // namespace loupe::instrument
