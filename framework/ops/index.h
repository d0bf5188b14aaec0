// Row gathers: the batch of a data set that lives in device (or host) memory.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// out[i] = src[idx[i]] * scale along dimension 0, converted to out_dtype (uint8 images -> float
// in [0, 1] with scale 1/255, uint8 labels -> int32). idx: int32 on src's device. No autograd.
// format: out's memory format; ChannelsLast (a 4-D src [N, C, H, W]) writes the batch in the
// order a channels-last first layer reads it.
Tensor index_select(const Tensor& src, const Tensor& idx, DType out_dtype, double scale = 1.0,
                    MemoryFormat format = MemoryFormat::Contiguous);

struct IndexKernels {
  // src contiguous [rows, row_elems]; out [n, row_elems] contiguous, or, with channels > 0, each
  // row's [channels, row_elems / channels] stored transposed (channels-last).
  void (*gather)(const ExecContext& ctx, const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n,
                 int64_t row_elems, double scale, int64_t channels);
};

}  // namespace loupe
