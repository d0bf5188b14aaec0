// The second pass of a per-channel sum whose first pass left one float32 partial per block and
// channel (partial[block * C + c]): bias_act's backward and max pooling's with relu and the bias
// (ops/bias_act_cuda.cu, ops/pool_cuda.cu). Deterministic: fixed orders throughout.
#pragma once
#include "core/cuda_util.cuh"

namespace loupe::cuda {

// gb[c] = the blocks' partial sums of channel c: one block a channel, its threads each summing
// every kSumThreads-th partial, then a fixed-order tree (a thread looping over hundreds of
// partials alone waits on each load in turn: lab/benchmarks.md, "The step as one CUDA graph, and
// fewer kernels"). Channels from `head` on go to tail[c - head] instead (two outputs, one pass).
constexpr int kSumThreads = 128;
template <class T>
__global__ void sum_blocks(T* gb, const float* partial, int blocks, int64_t C, int64_t head, T* tail) {
  __shared__ float s[kSumThreads];
  const int64_t c = blockIdx.x;
  float t = 0.f;
  for (int k = threadIdx.x; k < blocks; k += kSumThreads) t += partial[int64_t(k) * C + c];
  s[threadIdx.x] = t;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) (c < head ? gb[c] : tail[c - head]) = from_float<T>(s[0]);
}

}  // namespace loupe::cuda
