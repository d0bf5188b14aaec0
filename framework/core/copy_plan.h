// How a strided copy is laid out for the GPU kernels (core/copy_cuda.cu): the copy's dimensions
// reduced to as few as the two layouts allow, and which of three kernels fits them. Host code
// without CUDA, so that the CPU tests check the choice on every build.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace loupe {

struct CopyPlan {
  enum class Path {
    Rows,       // innermost dimension contiguous in both: whole rows, in vectors where aligned
    Transpose,  // dst's innermost contiguous, src contiguous along another, both at least 16 long:
                // 32x32 tiles through shared memory
    General,    // anything else: offsets by division, a few elements per thread
  };
  Path path = Path::General;
  // The dimensions, outermost first, in dst's memory order (dst's strides descend), size-1
  // dimensions dropped and neighbours that are contiguous with each other in both merged; at
  // least one. Sizes and strides in elements.
  int nd = 0;
  int64_t size[kMaxDims] = {}, dst[kMaxDims] = {}, src[kMaxDims] = {};
  // Rows: the bytes each thread loads and stores at once, a multiple of the element size: up to
  // 16 where the row's bytes, both base addresses and every outer stride in bytes allow it.
  int unit = 1;
  // Transpose: the dimension along which src has stride 1 (dst has stride 1 along nd - 1).
  int src_inner = -1;
  // Every element index and offset fits in 31 bits and no stride is negative: the kernels may
  // use 32-bit index arithmetic.
  bool index32 = false;
};

// The plan for copying src (strides src_strides, first element at src_addr) into dst, both of
// `shape` and elements of `elem_size` bytes. numel(shape) > 0.
CopyPlan plan_copy(const Shape& shape, const Shape& dst_strides, const Shape& src_strides, int elem_size,
                   uintptr_t dst_addr, uintptr_t src_addr);

const char* copy_path_name(CopyPlan::Path p);

}  // namespace loupe
