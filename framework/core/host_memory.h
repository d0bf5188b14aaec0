// What the host can still give this process (docs/reliability.md, "Memory checked first"): the
// model's estimate is checked against it before the build (models/memory.h), and a reader checks
// the size a file declares against it before allocating it.
#pragma once
#include <string>

namespace loupe {

// Bytes this process can still allocate on the host: the least of /proc/meminfo's MemAvailable,
// each enclosing cgroup's limit less its usage (its reclaimable page cache not counted as used),
// and RLIMIT_AS less the address space mapped now. A negative value: none could be read.
double host_memory_free();
// The cgroup part, from a /proc/self/cgroup copy at `proc_cgroup` and a cgroup tree at
// `cgroup_root` (a test seam, as cores_within_cgroups): cgroup v2's memory.max less memory.current
// less memory.stat's inactive_file, v1's memory.limit_in_bytes less memory.usage_in_bytes less
// total_inactive_file, the least over the cgroup and those above it; negative when none is set.
double cgroup_memory_free(const std::string& proc_cgroup, const std::string& cgroup_root);

// "3.1 GB", "512 MB", "4 kB": decimal units, as the messages read.
std::string bytes_text(double bytes);

// "WHAT needs about X, more than the Y this machine has free: FIX" when `bytes` is past
// host_memory_free(), else "" (also where that is unknown).
std::string host_memory_shortfall(double bytes, const std::string& what, const std::string& fix);
// Throws host_memory_shortfall's sentence, when there is one: "WHAT needs about X, more than the Y this machine has free: FIX" when `bytes` is past
// host_memory_free(); nothing where that is unknown.
void require_host_memory(double bytes, const std::string& what, const std::string& fix);

}  // namespace loupe
