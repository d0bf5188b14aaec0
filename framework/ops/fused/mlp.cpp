#include "ops/fused/mlp.h"

#include <array>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/knobs.h"
#include "core/op_record.h"
#include "ops/fused/linear_act.h"
#include "ops/view.h"

namespace loupe {

namespace {
// The stack's shape and pointers (no gradients, no draws) when its form fits the fused kernels;
// a.layers == 0 when it does not.
MlpArgs fused_form(const Tensor& x, const std::vector<MlpLayer>& layers) {
  MlpArgs a;
  const int L = int(layers.size());
  if (L < 2 || L > kMlpMaxLayers || !x.device().is_cuda() || x.dim() != 2 || !x.is_contiguous() ||
      (x.dtype() != DType::f16 && x.dtype() != DType::bf16))
    return a;
  int64_t in = x.size(1);
  const bool streamed = in >= 8 && in <= kMlpStreamedInMax && in % 8 == 0;
  const bool wide = in > kMlpStreamedInMax && in <= kMlpWideInMax && in % 64 == 0;
  if ((!streamed && !wide) || x.size(0) < 1 || x.size(0) > (int64_t(1) << 30)) return a;
  for (int l = 0; l < L; ++l) {
    const MlpLayer& m = layers[size_t(l)];
    const bool head = l == L - 1;
    if (!m.w.defined() || !m.b.defined() || m.w.dim() != 2 || m.w.size(1) != in || !m.w.is_contiguous() ||
        !m.b.is_contiguous() || m.w.dtype() != x.dtype() || m.b.dtype() != x.dtype() || m.w.device() != x.device() ||
        m.b.device() != x.device() || m.b.dim() != 1 || m.b.size(0) != m.w.size(0))
      return a;
    const int64_t out = m.w.size(0);
    if (head ? (m.relu || m.p > 0 || out < 1 || out > 16) : (!m.relu || out % 128 || out < 128 || out > 512)) return a;
    a.width[l] = int(out);
    a.w[l] = m.w.data_ptr();
    a.b[l] = m.b.data_ptr();
    in = out;
  }
  // 16-byte copies of rows: every row start aligned
  auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  if (!aligned(x)) return a;
  for (const MlpLayer& m : layers)
    if (!aligned(m.w) || !aligned(m.b)) return a;
  a.rows = int(x.size(0));
  a.in = int(x.size(1));
  a.dtype = x.dtype();
  a.x = x.data_ptr();
  a.layers = L;
  return a;
}

bool fused_fit(const Tensor& x, const std::vector<MlpLayer>& layers, MlpArgs& a) {
  static const bool on = knobs::flag("LOUPE_FUSE_MLP");
  if (!on) return false;
  a = fused_form(x, layers);
  if (!a.layers) return false;
  const MlpKernels* k = Backends<MlpKernels>::table[int(DeviceType::CUDA)];
  return k && k->fits(current_context(), a);
}

double product_flops(const MlpArgs& a, int l) {
  return 2.0 * double(a.rows) * double(l ? a.width[l - 1] : a.in) * double(a.width[l]);
}

struct MlpBackward : autograd::Node {
  MlpArgs a;
  bool need_x = false;
  Tensor x;
  std::array<Tensor, kMlpMaxLayers> w;
  std::array<Tensor, kMlpMaxLayers - 1> h;  // the hidden layers' outputs
  const char* name() const override { return "MlpBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gy = contiguous(g[0]);
    if (reinterpret_cast<uintptr_t>(gy.data_ptr()) % 16) gy = clone(gy);  // the kernels copy 16-byte pieces
    LOUPE_CHECK(gy.dtype() == x.dtype(), "mlp: the gradient must be in the output's dtype");
    MlpArgs b = a;
    b.x = x.data_ptr();
    b.gy = gy.data_ptr();
    std::vector<Tensor> keep;  // the scratch, alive until the kernels are queued
    std::vector<Tensor> out(1 + 2 * kMlpMaxLayers);
    double flops = 0;
    if (need_x) {  // the input's gradient, dz0 W0 (x is a dense head's input: no ReLU before it here)
      out[0] = empty(Shape{a.rows, a.in}, x.dtype(), x.device());
      b.gx = out[0].data_ptr();
      flops += product_flops(a, 0);
    }
    for (int l = 0; l < a.layers; ++l) {
      const int64_t in = l ? a.width[l - 1] : a.in;
      b.w[l] = w[size_t(l)].data_ptr();
      if (l < a.layers - 1) {
        b.h[l] = h[size_t(l)].data_ptr();
        keep.push_back(empty(Shape{a.rows, a.width[l]}, x.dtype(), x.device()));
        b.dz[l] = keep.back().data_ptr();
      }
      Tensor gw = empty(Shape{a.width[l], in}, x.dtype(), x.device());
      Tensor gb = empty(Shape{a.width[l]}, x.dtype(), x.device());
      b.gw[l] = gw.data_ptr();
      b.gb[l] = gb.data_ptr();
      out[size_t(1 + 2 * l)] = gw;
      out[size_t(2 + 2 * l)] = gb;
      flops += product_flops(a, l) + double(a.rows) * a.width[l];  // the weight's and bias's
      if (l)  // the input's, through the previous layer's ReLU and dropout (as bias_act_grad counts them)
        flops += product_flops(a, l) + double(a.rows) * a.width[l - 1] * (a.p[l - 1] > 0 ? 2 : 1);
    }
    kernels<MlpKernels>(x.device()).backward(current_context(), b);
    add_flops(flops);
    return out;
  }
  void release() override {
    x = Tensor();
    w.fill(Tensor());
    h.fill(Tensor());
  }
};

Tensor unfused(const Tensor& x, const std::vector<MlpLayer>& layers, bool training) {
  Tensor y = x;
  for (const MlpLayer& m : layers)
    y = linear_act(y, m.w, m.b, m.relu ? std::optional<Act>(Act::Relu) : std::nullopt, m.p, training);
  return y;
}
}  // namespace

bool mlp_fused_fits(const Tensor& x, const std::vector<MlpLayer>& layers) {
  MlpArgs a;
  return fused_fit(x, layers, a);
}

Tensor mlp(const Tensor& x, const std::vector<MlpLayer>& layers, bool training) {
  MlpArgs a;
  if (!fused_fit(x, layers, a)) return unfused(x, layers, training);
  std::array<Tensor, kMlpMaxLayers> W, B;
  for (size_t l = 0; l < layers.size(); ++l) W[l] = layers[l].w, B[l] = layers[l].b;
  OpScope scope_("mlp", {&x, &W[0], &B[0], &W[1], &B[1], &W[2], &B[2], &W[3], &B[3]});
  std::array<Tensor, kMlpMaxLayers - 1> h;
  double flops = 0;
  for (int l = 0; l < a.layers; ++l) {
    flops += product_flops(a, l) + double(a.rows) * a.width[l];
    if (l == a.layers - 1) break;
    h[size_t(l)] = empty(Shape{a.rows, a.width[l]}, x.dtype(), x.device());
    a.h[l] = h[size_t(l)].data_ptr();
    const double p = layers[size_t(l)].p;
    LOUPE_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), got ", p);
    if (training && p > 0) {  // drawn in the layers' order, as linear_act would
      a.p[l] = float(p);
      a.rng[l] = default_generator().draw(uint64_t(a.rows) * uint64_t(a.width[l]));
    }
    flops += double(a.rows) * a.width[l] * (a.p[l] > 0 ? 2 : 1);  // relu, dropout
  }
  Tensor y = empty(Shape{a.rows, a.width[a.layers - 1]}, x.dtype(), x.device());
  a.y = y.data_ptr();
  kernels<MlpKernels>(x.device()).forward(current_context(), a);
  add_flops(flops);
  if (autograd::needs_grad({&x, &W[0], &B[0], &W[1], &B[1], &W[2], &B[2], &W[3], &B[3]})) {
    auto n = std::make_shared<MlpBackward>();
    n->a = a;
    n->need_x = x.requires_grad();
    n->x = x.detach();
    for (int l = 0; l < a.layers; ++l) {
      n->w[size_t(l)] = W[size_t(l)].detach();
      if (l < a.layers - 1) n->h[size_t(l)] = h[size_t(l)].detach();
    }
    autograd::record(n, {&x, &W[0], &B[0], &W[1], &B[1], &W[2], &B[2], &W[3], &B[3]}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
