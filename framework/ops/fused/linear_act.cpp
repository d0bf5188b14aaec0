#include "ops/fused/linear_act.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/bias_act.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

namespace {
// The GEMM with the bias in its epilogue, when the backend has one for these (contiguous) operands:
// `call` is the table's linear_bias or weight_grad_bias. Counts the FLOPs of the product and the
// bias. False, having done nothing, otherwise.
bool bias_gemm(bool (*call)(const ExecContext&, const BiasGemmArgs&), const Tensor& a, const Tensor& b,
               const Tensor& d, const Tensor& bias, int64_t rows, int64_t in, int64_t out) {
  if (!call || !a.is_contiguous() || !b.is_contiguous() || rows == 0 || in == 0 || out == 0) return false;
  BiasGemmArgs g;
  g.rows = rows, g.in = in, g.out = out, g.dtype = a.dtype();
  g.a = a.data_ptr(), g.b = b.data_ptr(), g.d = d.data_ptr(), g.bias = bias.data_ptr();
  if (!call(current_context(), g)) return false;
  add_flops(2.0 * double(rows) * double(in) * double(out) + double(rows) * double(out));
  return true;
}

// A narrow layer's whole backward in the backend's one pass (a classifier's head: LinalgKernels::
// narrow_backward), for the products needed (x and w undefined where not); counts their FLOPs.
// False, having done nothing, where the backend has none or the case does not fit it.
bool try_narrow_backward(const Tensor& gy, const Tensor& x, const Tensor& w, bool need_b, Tensor& gx, Tensor& gw,
                         Tensor& gb) {
  const LinalgKernels& k = kernels<LinalgKernels>(gy.device());
  if (!k.narrow_backward || (!x.defined() && !w.defined()) || gy.dim() != 2 ||
      !narrow_backward_fits(gy.size(0), x.defined() ? x.size(1) : w.size(1), gy.size(1)) ||
      (x.defined() && (!x.is_contiguous() || x.dtype() != gy.dtype())) ||
      (w.defined() && (!w.is_contiguous() || w.dtype() != gy.dtype())))
    return false;
  const Tensor gz = contiguous(gy);
  NarrowBackwardArgs a;
  a.rows = gz.size(0), a.out = gz.size(1), a.in = x.defined() ? x.size(1) : w.size(1), a.dtype = gz.dtype();
  Tensor work = empty(Shape{narrow_backward_work(a.rows, a.in, a.out)}, DType::f32, gz.device());
  Tensor ox = w.defined() ? empty(Shape{a.rows, a.in}, gz.dtype(), gz.device()) : Tensor();
  Tensor ow = x.defined() ? empty(Shape{a.out, a.in}, gz.dtype(), gz.device()) : Tensor();
  Tensor ob = need_b ? empty(Shape{a.out}, gz.dtype(), gz.device()) : Tensor();
  a.gy = gz.data_ptr(), a.work = work.data<float>();
  if (x.defined()) a.x = x.data_ptr(), a.gw = ow.data_ptr();
  if (w.defined()) a.w = w.data_ptr(), a.gx = ox.data_ptr();
  if (need_b) a.gb = ob.data_ptr();
  if (!k.narrow_backward(current_context(), a)) return false;
  const double product = 2.0 * double(a.rows) * double(a.in) * double(a.out);
  add_flops(product * ((x.defined() ? 1 : 0) + (w.defined() ? 1 : 0)) + (need_b ? double(a.rows * a.out) : 0.0));
  gx = ox, gw = ow, gb = ob;
  return true;
}

struct LinearActBackward : autograd::Node {
  Tensor x, w, y;  // x when w needs a gradient, w when x does, the output when there is an epilogue
  BiasActArgs a;
  bool epilogue = false, need_x = false, need_w = false, need_b = false;
  const char* name() const override { return "LinearActBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const LinalgKernels& k = kernels<LinalgKernels>(g[0].device());
    Tensor gx, gw, gb;
    if (!epilogue && try_narrow_backward(g[0], need_w ? x : Tensor(), need_x ? w : Tensor(), need_b, gx, gw, gb))
      return {gx, gw, gb};
    // The bias gradient from the weight-gradient GEMM's epilogue, if the backend can.
    const bool in_gemm = need_b && need_w && k.weight_grad_bias;
    Tensor gz;
    if (epilogue) {
      BiasActGrads r = bias_act_grad(y, g[0], a, need_b && !in_gemm);
      gz = r.gx, gb = r.gb;
    } else {
      gz = contiguous(g[0]);
    }
    const int64_t rows = gz.size(0), out = gz.size(1), in = x.defined() ? x.size(1) : w.size(1);
    if (in_gemm) {
      gw = empty(Shape{out, in}, gz.dtype(), gz.device());
      gb = empty(Shape{out}, gz.dtype(), gz.device());
      if (!bias_gemm(k.weight_grad_bias, x, gz, gw, gb, rows, in, out)) gw = gb = Tensor();
    }
    if (need_w && !gw.defined()) gw = matmul_nograd(transpose(gz, 0, 1), x);  // in w's layout
    if (need_b && !gb.defined()) gb = sum_except(gz, 1);
    if (need_x) gx = matmul_nograd(gz, w);
    return {gx, gw, gb};
  }
  void release() override { x = w = y = Tensor(); }
};
}  // namespace

Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& b, std::optional<Act> act, double p,
                  bool training) {
  OpScope scope_("linear", {&x, &w, &b});
  LOUPE_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "linear: x [N, in] and w [out, in], got ",
              x.shape().str(), " and ", w.shape().str());
  const bool dropout = check_epilogue("linear", x, b, w.size(0), act, p, training);
  const bool epilogue = act || dropout;
  const int64_t rows = x.size(0), in = x.size(1), out = w.size(0);
  Tensor y, bc = b.defined() ? contiguous(b) : Tensor();
  BiasActArgs a;
  if (!epilogue && bc.defined() && x.dtype() == w.dtype() && x.device() == w.device()) {
    y = empty(Shape{rows, out}, x.dtype(), x.device());
    if (!bias_gemm(kernels<LinalgKernels>(x.device()).linear_bias, x, w, y, bc, rows, in, out)) y = Tensor();
  }
  if (!y.defined()) {
    {
      NoGradGuard no_record;  // matmul's checks (dtypes, devices) and its GEMM; the node is ours
      y = matmul(x, transpose(w, 0, 1));
    }
    if (bc.defined() || epilogue) {
      a = bias_act_args(y, act, dropout, p);
      y = bias_act_apply(y, bc, a);
    }
  }
  if (autograd::needs_grad({&x, &w, &b})) {
    auto n = std::make_shared<LinearActBackward>();
    n->need_x = x.requires_grad();
    n->need_w = w.requires_grad();
    n->need_b = b.defined() && b.requires_grad();
    n->epilogue = epilogue;
    n->a = a;
    if (n->need_w) n->x = x.detach();
    if (n->need_x) n->w = w.detach();
    if (epilogue) n->y = y.detach();
    autograd::record(n, {&x, &w, &b}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
