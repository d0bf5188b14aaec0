// A process-wide pool of persistent worker threads for the CPU ops: OpenMP's (libgomp) in builds
// with oneDNN, which threads with it too, so one pool serves both; loupe's own otherwise.
#pragma once
#include <cstdint>
#include <functional>

namespace loupe {

// Threads that parallel_for uses, the calling thread included. Starts as LOUPE_NUM_THREADS when
// set (a positive integer), else std::thread::hardware_concurrency().
int num_threads();

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
