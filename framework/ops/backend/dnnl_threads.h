// oneDNN's thread count, for the files that call it (ops/backend/conv_dnnl.cpp, ops/backend/gemm_blas.cpp); only
// in builds with oneDNN (LOUPE_WITH_DNNL).
#pragma once
#include <omp.h>

#include "core/thread_pool.h"

namespace loupe::cpu {

// Debian's oneDNN runs its kernels on OpenMP (libgomp), the same threads loupe's own ops run on in
// this build (core/thread_pool.cpp). oneDNN sizes its teams by omp_get_max_threads(), so that is
// set to loupe's count (--threads, LOUPE_NUM_THREADS, set_num_threads) before every call. Per call
// rather than in set_num_threads because OpenMP's count belongs to the calling thread (a trainer
// thread other than main would not see it), and it costs a thread-local read when unchanged.
// Inside a parallel_for (an op calling oneDNN per item) nothing is set: oneDNN then runs on the
// calling thread alone.
inline void match_dnnl_threads() {
  const int n = num_threads();
  if (!omp_in_parallel() && omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace loupe::cpu
