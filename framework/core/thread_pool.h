// A process-wide pool of persistent worker threads for the CPU ops: OpenMP's (libgomp) in builds
// with oneDNN, which threads with it too, so one pool serves both; loupe's own otherwise.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace loupe {

// Threads that parallel_for uses, the calling thread included. Starts as LOUPE_NUM_THREADS when
// set (a positive integer), else the cores this process may use (usable_cores()).
int num_threads();
// Whether LOUPE_NUM_THREADS set the count: a count the user chose, which a run keeps (run/threads.h).
bool num_threads_from_env();

// The cores this process may run on: the CPUs of its affinity mask (taskset, a container's cpuset),
// fewer where a cgroup CPU quota (v2's cpu.max, v1's cpu.cfs_quota_us: a container's --cpus, a CI
// runner's limit) of its cgroup or one above it allows fewer, rounded up; at least 1. A machine's
// whole core count (hardware_concurrency) oversubscribed such a process: threads past its share
// wait for a core at every barrier.
int usable_cores();
// The CPUs of this process's affinity mask (the machine's count where it cannot be read).
int affinity_cores();
// usable_cores()'s walk with its inputs given (a test seam: docs/testing.md): `cores`, lowered by
// the quota of each cgroup that /proc/self/cgroup's copy at `proc_cgroup` names, and of each one
// above it, read under `cgroup_root` (/sys/fs/cgroup; cgroup v1's cpu controller in its cpu/).
int cores_within_cgroups(int cores, const std::string& proc_cgroup, const std::string& cgroup_root);
// The quota part, from the text of a cgroup v2 cpu.max file ("max 100000", "150000 100000"):
// quota / period rounded up, or 0 when there is no limit or the text is not that.
int cores_from_cpu_max(const std::string& text);

// Resizes the pool (n >= 1; 1 means everything runs inline). For tests and benchmarks: do not
// call it while a parallel_for is running.
void set_num_threads(int n);

// Runs fn(chunk_begin, chunk_end) over [begin, end) split into at most num_threads() contiguous
// chunks, each at least `grain` long. The caller runs chunks too and returns when all are done.
// Runs inline, as one chunk, when the range is too small to split, when called from inside a
// parallel_for (no nested parallelism, no deadlock) or while another thread's parallel_for holds
// the pool. The first exception thrown by fn is rethrown here once every chunk has finished.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace loupe
