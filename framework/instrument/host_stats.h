// The host process's own CPU time and resident memory, read from /proc (Linux). The epoch report
// turns CPU seconds over wall seconds into host CPU utilisation (1.0 = one core busy).
#pragma once

namespace loupe::instrument {

// ok is false where /proc could not be read (not Linux, or a sandbox without /proc); the
// numbers are then NaN, so a caller that ignores ok prints nonsense rather than a plausible 0.
struct ProcessStats {
  double cpu_seconds;  // user + system time of all threads since the process started
  double rss_bytes;    // resident set size now
  bool ok;
};

ProcessStats read_process_stats();

}  // namespace loupe::instrument
