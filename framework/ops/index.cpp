#include "ops/index.h"

#include "core/dispatch.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

Tensor index_select(const Tensor& src, const Tensor& idx, DType out_dtype, double scale, MemoryFormat format) {
  OpScope scope_("index_select", {&idx});
  LOUPE_CHECK(src.dim() >= 1, "index_select needs a tensor with at least one dimension");
  LOUPE_CHECK(idx.dtype() == DType::i32 && idx.dim() == 1, "index_select needs int32 indices [n]");
  LOUPE_CHECK(idx.device() == src.device(), "index_select: indices on ", idx.device().str(), ", data on ",
              src.device().str());
  Shape s = src.shape();
  s[0] = idx.size(0);
  const bool cl = format == MemoryFormat::ChannelsLast && src.dim() == 4 && src.size(1) > 1;
  Tensor out = empty(s, out_dtype, src.device(), cl ? format : MemoryFormat::Contiguous);
  int64_t row = src.size(0) ? src.numel() / src.size(0) : 0;
  if (out.numel() > 0)
    kernels<IndexKernels>(src.device())
        .gather(current_context(), out, contiguous(src), contiguous(idx), idx.size(0), row, scale, cl ? src.size(1) : 0);
  scope_.add_bytes(double(out.numel()) * double(dtype_size(src.dtype())));  // the rows it reads
  return scope_.result(out);
}

}  // namespace loupe
