// GPU time of work the host queues, without the host's launch rate in it: for choosing between
// implementations by timing them (cuBLASLt's algorithms, the LSTM's kernels) on the GPU alone, as a
// CUDA graph replays them.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace loupe::cuda {

// Microseconds per call of `run` (which queues work on s and returns false if it could not):
// `runs` calls in a row queued behind a kernel that holds s for `hold_cycles` clock ticks, so that
// they run back to back whatever each launch costs the host. The hold, in GPU clock ticks, must
// outlast queueing them. Negative when a call returns false. Not inside a capture.
float time_on_gpu(cudaStream_t s, int runs, long long hold_cycles, const std::function<bool()>& run);

}  // namespace loupe::cuda
