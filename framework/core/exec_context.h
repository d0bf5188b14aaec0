// What a kernel runs under, handed to it by the op that dispatches it (docs/design.md, "The op
// pattern"): every kernel table's function takes it as its first argument, so that no kernel reads
// the thread's or the process's state itself. An op makes it once, where it dispatches
// (current_context(): the thread's innermost PrecisionScope). A backward node makes its own when it
// runs, but for the convolution's, the LSTM's and the embedding's, which keep their forward's; the
// trainer holds one precision scope over forward and backward, so a layer's backward runs in the
// precision its forward ran in.
//
// The precision decides cuBLAS's and cuDNN's math (TF32 tensor operations for float32 data only
// under tf32) and is part of the cached cuDNN plans' keys. The lane is where CUDA kernels go.
#pragma once
#include "core/precision.h"

namespace loupe {

// A CUDA stream and the cuBLAS and cuDNN handles bound to it (defined in core/cuda_util.cuh; the
// CPU code only carries the pointer).
struct ExecLane;

struct ExecContext {
  Precision precision = Precision::FP32;
  // The CUDA kernels' stream and library handles. Null: the runtime's compute stream and its
  // handles, the lane of everything loupe runs (the trainer's steps, their capture into a CUDA
  // graph, the runtime's copies, allocations and synchronisation). Another lane
  // (cuda::new_lane(), CudaRuntime::lane_create()) orders nothing against that one, and some
  // kernels still allocate their scratch memory, or copy through an op, on the compute stream
  // (reductions' partial sums, the embedding's backward, misaligned inputs realigned): whoever
  // hands another lane to a kernel orders it against the compute stream with events, before and
  // after. The CPU kernels ignore it.
  ExecLane* lane = nullptr;
};

// The calling thread's context: the precision of its innermost live PrecisionScope, the runtime's
// lane.
inline ExecContext current_context() { return ExecContext{precision(), nullptr}; }

}  // namespace loupe
