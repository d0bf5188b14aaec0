#include "ops/linalg.h"

#include <algorithm>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/elementwise.h"
#include "ops/fused/linear_act.h"
#include "ops/view.h"

namespace loupe {

namespace {
// A 2-D operand as the GEMM sees it: data, leading dimension and whether it is stored transposed.
struct Operand {
  Tensor t;  // keeps a contiguous copy alive when one was needed
  bool trans = false;
  int64_t ld = 0;
};

Operand as_operand(const Tensor& x) {
  int64_t r = x.size(0), c = x.size(1);
  const Shape& st = x.strides();
  if ((st[1] == 1 || c == 1) && st[0] >= std::max<int64_t>(c, 1)) return {x, false, st[0]};
  if ((st[0] == 1 || r == 1) && st[1] >= std::max<int64_t>(r, 1)) return {x, true, st[1]};
  Tensor cx = contiguous(x);
  return {cx, false, std::max<int64_t>(c, 1)};
}

}  // namespace

Tensor matmul_nograd(const Tensor& a, const Tensor& b) {
  Tensor out = empty(Shape{a.size(0), b.size(1)}, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  Operand A = as_operand(a), B = as_operand(b);
  GemmArgs g;
  g.ta = A.trans;
  g.tb = B.trans;
  g.M = a.size(0);
  g.N = b.size(1);
  g.K = a.size(1);
  g.A = A.t.data_ptr();
  g.lda = A.ld;
  g.B = B.t.data_ptr();
  g.ldb = B.ld;
  g.C = out.data_ptr();
  g.ldc = std::max<int64_t>(g.N, 1);
  g.dtype = a.dtype();
  if (g.K == 0) { fill_(out, 0); return out; }
  kernels<LinalgKernels>(a.device()).gemm(current_context(), g);
  add_flops(2.0 * double(g.M) * double(g.N) * double(g.K));
  return out;
}

namespace {
struct MatmulBackward : autograd::Node {
  Tensor a, b;
  bool need_a = false, need_b = false;
  // b is a transposed view (a layer's weight W as W^T): its gradient is made in W's layout,
  // (g^T a)^T, so that it reaches W's .grad contiguous: an add of a transposed gradient is a copy
  // and an add (on the CPU it cost more than the GEMM that made it), and on the GPU a contiguous
  // one joins the backward pass's single launch of gradient additions (autograd/engine.cpp).
  bool b_transposed = false;
  const char* name() const override { return "MatmulBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    Tensor ga = need_a ? matmul_nograd(g, transpose(b, 0, 1)) : Tensor();
    Tensor gb;
    if (need_b && b_transposed) gb = transpose(matmul_nograd(transpose(g, 0, 1), a), 0, 1);
    else if (need_b) gb = matmul_nograd(transpose(a, 0, 1), g);
    return {ga, gb};
  }
  void release() override { a = b = Tensor(); }
};
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  OpScope scope_("matmul", {&a, &b});
  LOUPE_CHECK(a.dim() == 2 && b.dim() == 2, "matmul needs 2-D tensors, got ", a.shape().str(), " and ", b.shape().str());
  LOUPE_CHECK(a.size(1) == b.size(0), "matmul: shapes ", a.shape().str(), " and ", b.shape().str(),
              " do not chain (", a.size(1), " != ", b.size(0), ")");
  LOUPE_CHECK(a.device() == b.device(), "matmul: tensors on ", a.device().str(), " and ", b.device().str());
  LOUPE_CHECK(a.dtype() == b.dtype() && is_floating(a.dtype()),
              "matmul supports float32, float64, float16 and bfloat16 (same for both), got ", dtype_name(a.dtype()),
              " and ", dtype_name(b.dtype()));
  // float16/bfloat16 (mixed precision: 16-bit storage, float32 accumulation) run on cuBLAS only.
  LOUPE_CHECK(a.device().is_cuda() || a.dtype() == DType::f32 || a.dtype() == DType::f64, "matmul of ",
              dtype_name(a.dtype()), " tensors runs on CUDA only; on the CPU use float32 (--precision fp32)");
  Tensor out = matmul_nograd(a, b);
  if (autograd::needs_grad({&a, &b})) {
    auto n = std::make_shared<MatmulBackward>();
    n->need_a = a.requires_grad();
    n->need_b = b.requires_grad();
    n->b_transposed = b.size(0) > 1 && b.size(1) > 1 && b.strides()[0] == 1 && b.strides()[1] == b.size(0);
    if (n->need_b) n->a = a.detach();
    if (n->need_a) n->b = b.detach();
    autograd::record(n, {&a, &b}, {&out});
  }
  return scope_.result(out);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return linear_act(x, w, b, std::nullopt, 0, false);
}

void gemm_raw(const ExecContext& ctx, Device d, DType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
              const void* A, int64_t lda, const void* B, int64_t ldb, void* C, int64_t ldc, bool accumulate) {
  GemmArgs g;
  g.ta = ta, g.tb = tb, g.M = M, g.N = N, g.K = K, g.A = A, g.lda = lda, g.B = B, g.ldb = ldb, g.C = C, g.ldc = ldc;
  g.beta = accumulate ? 1 : 0;
  g.dtype = t;
  kernels<LinalgKernels>(d).gemm(ctx, g);
}

}  // namespace loupe
