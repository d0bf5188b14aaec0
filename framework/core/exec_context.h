// What a kernel runs under, handed to it by the op that dispatches it (issue 33, point 2;
// docs/plans/heart_on_one_screen.md): the kernel tables' functions that depend on it take it as
// their first argument, so that no kernel reads the thread's state itself. An op makes it once,
// where it dispatches (current_context(): the thread's innermost PrecisionScope), and a backward
// node keeps its forward's, so a layer's backward runs in the precision its forward ran in.
//
// The precision decides cuBLAS's and cuDNN's math (TF32 tensor operations for float32 data only
// under tf32) and is part of the cached cuDNN plans' keys. The stream and the library handles are
// still the runtime's one compute stream and its handles (core/cuda_util.cuh), for every op alike.
#pragma once
#include "core/precision.h"

namespace loupe {

struct ExecContext {
  Precision precision = Precision::FP32;
};

// The calling thread's context: the precision of its innermost live PrecisionScope.
inline ExecContext current_context() { return ExecContext{precision()}; }

}  // namespace loupe
