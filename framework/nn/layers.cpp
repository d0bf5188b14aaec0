#include "nn/layers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/knobs.h"
#include "core/nvtx.h"
#include "core/philox.h"
#include "core/precision.h"
#include "core/random.h"
#include "ops/bias_act.h"
#include "ops/fused/linear_act.h"
#include "ops/fused/mlp.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/pool.h"
#include "ops/view.h"

namespace loupe::nn {

void glorot_uniform_(const Tensor& t, int64_t fan_in, int64_t fan_out) {
  LOUPE_CHECK(t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous(), "glorot_uniform_ fills a CPU float32 tensor");
  double a = std::sqrt(6.0 / double(fan_in + fan_out));
  Generator& g = default_generator();
  uint64_t off = g.take(uint64_t(t.numel()));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float((2.0 * philox_uniform(g.seed, off, uint64_t(i)) - 1.0) * a);
}

void variance_scaling_(const Tensor& t, int64_t fan_in, int64_t fan_out, const VarianceScaling& v) {
  LOUPE_CHECK(t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous(), "variance_scaling_ fills a CPU float32 tensor");
  const double n = v.mode == FanMode::In ? double(fan_in) : v.mode == FanMode::Out ? double(fan_out) : double(fan_in + fan_out) / 2;
  const double variance = v.scale / std::max(1.0, n);
  if (v.distribution == Distribution::Uniform) return uniform_(t, -std::sqrt(3 * variance), std::sqrt(3 * variance));
  // Box-Muller on two uniforms per try; a truncated value outside two deviations is drawn again
  // (up to 16 tries, each from counters of its own: a value is the same whatever its neighbours).
  constexpr int kTries = 16;
  const bool truncated = v.distribution == Distribution::TruncatedNormal;
  const double sd = std::sqrt(variance) / (truncated ? 0.87962566103423978 : 1.0);
  Generator& g = default_generator();
  const uint64_t off = g.take(uint64_t(t.numel()) * 2 * kTries);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double z = 0;
    for (int k = 0; k < kTries; ++k) {
      const uint64_t at = (uint64_t(i) * kTries + uint64_t(k)) * 2;
      const double u1 = 1.0 - philox_uniform(g.seed, off, at), u2 = philox_uniform(g.seed, off, at + 1);
      z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      if (!truncated || std::fabs(z) <= 2) break;
    }
    p[i] = float(std::clamp(z, truncated ? -2.0 : -1e9, truncated ? 2.0 : 1e9) * sd);
  }
}

void uniform_(const Tensor& t, double lo, double hi) {
  LOUPE_CHECK(t.device().is_cpu() && t.dtype() == DType::f32 && t.is_contiguous(),
              "uniform_ fills a contiguous CPU float32 tensor");
  Generator& g = default_generator();
  uint64_t off = g.take(uint64_t(t.numel()));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(lo + (hi - lo) * philox_uniform(g.seed, off, uint64_t(i)));
}

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  Tensor w = empty(Shape{out, in}, DType::f32, kCPU);
  glorot_uniform_(w, in, out);
  weight = register_parameter("weight", w);
  if (with_bias) bias = register_parameter("bias", zeros(Shape{out}, DType::f32, kCPU));
}

Tensor Linear::forward(const Tensor& x) { return forward_fused(x, Epilogue{}); }

Tensor Linear::forward_fused(const Tensor& x, const Epilogue& e) {
  // Tensor cores take a GEMM from 8 outputs on (their narrowest tile): narrower, a 16-bit GEMM is
  // a GEMV on CUDA cores as float32's is, and the casts into and out of 16 bits only cost. So such
  // a layer fed float32 stays float32 (imdb_fasttext's Dense(50 -> 1) after its float32 embedding
  // mean: casts and loss scaling for nothing; lab/benchmarks.md, "The step as one CUDA graph, and
  // fewer kernels").
  const bool narrow = out_features < 8 && x.dtype() == DType::f32;
  auto cast = [&](const Tensor& t) { return narrow ? t : autocast(t); };
  return linear_act(cast(x), cast(weight), cast(bias), e.act, e.dropout, true);
}

std::string Linear::type_name() const {
  return "Linear(" + std::to_string(in_features) + " -> " + std::to_string(out_features) + ")";
}

Conv2d::Conv2d(int64_t in, int64_t out, int k, int s, int pad, bool with_bias)
    : in_channels(in), out_channels(out), kernel(k), stride(s), padding(pad) {
  Tensor w = empty(Shape{out, in, k, k}, DType::f32, kCPU);
  glorot_uniform_(w, in * k * k, out * k * k);
  weight = register_parameter("weight", w);
  if (with_bias) bias = register_parameter("bias", zeros(Shape{out}, DType::f32, kCPU));
}

Tensor Conv2d::forward(const Tensor& x) { return forward_fused(x, Epilogue{}); }

Conv2dParams Conv2d::params() const {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = padding;
  return p;
}

Tensor Conv2d::input(const Tensor& x) const {
  const Tensor xc = autocast(x);
  return memory_format() == MemoryFormat::ChannelsLast ? contiguous(xc, MemoryFormat::ChannelsLast) : xc;
}

Tensor Conv2d::forward_fused(const Tensor& x, const Epilogue& e) {
  const Conv2dParams p = params();
  const Tensor xc = input(x);
  if (bias.defined()) return conv2d_bias_act(xc, autocast(weight), autocast(bias), p, e.act, e.dropout, true);
  Tensor y = conv2d(xc, autocast(weight), p);
  if (!e.act && e.dropout == 0) return y;
  return bias_act(y, Tensor(), e.act, e.dropout, true);
}

Module::InputLayout Conv2d::input_layout() const {
  return {weight.device().is_cuda() ? compute_dtype() : DType::f32, memory_format()};  // as input() makes x
}

std::string Conv2d::type_name() const {
  return "Conv2d(" + std::to_string(in_channels) + " -> " + std::to_string(out_channels) + ", " +
         std::to_string(kernel) + "x" + std::to_string(kernel) + ", stride " + std::to_string(stride) + ", pad " +
         std::to_string(padding) + ")";
}

static Pool2dParams pool_params(int k, int s, int pad) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s > 0 ? s : k;
  p.pad_h = p.pad_w = pad;
  return p;
}

MaxPool2d::MaxPool2d(int k, int s, int pad) : kernel_(k), stride_(s > 0 ? s : k), padding_(pad) {}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, pool_params(kernel_, stride_, padding_)); }
Tensor MaxPool2d::forward_fused(const Tensor& x, const Epilogue& e) {
  return max_pool2d(x, pool_params(kernel_, stride_, padding_), e.dropout, true);
}
std::string MaxPool2d::type_name() const { return "MaxPool2d(" + std::to_string(kernel_) + ")"; }
Pool2dParams MaxPool2d::params() const { return pool_params(kernel_, stride_, padding_); }

AvgPool2d::AvgPool2d(int k, int s, int pad) : kernel_(k), stride_(s > 0 ? s : k), padding_(pad) {}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, pool_params(kernel_, stride_, padding_)); }
std::string AvgPool2d::type_name() const { return "AvgPool2d(" + std::to_string(kernel_) + ")"; }

BatchNorm2d::BatchNorm2d(int64_t c, double momentum, double eps) : channels(c), momentum_(momentum), eps_(eps) {
  weight = register_parameter("weight", ones(Shape{c}));
  bias = register_parameter("bias", zeros(Shape{c}));
  running_mean = register_buffer("running_mean", zeros(Shape{c}));
  running_var = register_buffer("running_var", ones(Shape{c}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  // Half activations; the scale, shift and running statistics stay float32.
  return batch_norm(autocast(x), weight, bias, running_mean, running_var, is_training(), momentum_, eps_);
}

Tensor Reshape::forward(const Tensor& x) {
  Shape s{x.size(0)};
  for (int64_t d : shape_) s.push_back(d);
  return reshape(x, s);
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

bool ReLU::extend(Epilogue& e) const {
  if (e.act || e.has_dropout) return false;
  e.act = Act::Relu;
  return true;
}

Tensor Activation::forward(const Tensor& x) { return activation(act_, x); }

bool Activation::extend(Epilogue& e) const {
  if (e.act || e.has_dropout) return false;
  e.act = act_;
  return true;
}

std::string Activation::type_name() const {
  return act_ == Act::Sigmoid ? "Sigmoid" : act_ == Act::Tanh ? "Tanh" : "ReLU";
}

Tensor Nonlinearity::forward(const Tensor& x) { return nonlinearity(f_, x, slope_); }

std::string Nonlinearity::type_name() const {
  static const char* names[] = {"ELU", "SELU", "GELU", "SiLU", "HardSigmoid", "Softplus", "Softsign"};
  if (f_ != Nonlin::HardSigmoid) return names[int(f_)];
  std::ostringstream s;
  s << "HardSigmoid(" << slope_ << ")";
  return s.str();
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }

bool Dropout::extend(Epilogue& e) const {
  if (e.has_dropout || (e.act && *e.act != Act::Relu)) return false;
  e.has_dropout = true;
  e.dropout = is_training() ? p_ : 0.0;
  return true;
}

std::string Dropout::type_name() const {
  std::ostringstream s;
  s << "Dropout(" << p_ << ")";
  return s.str();
}

Sequential& Sequential::add(const std::string& name, std::shared_ptr<Module> m) {
  register_module(name, std::move(m));
  return *this;
}

// The longest run of epilogue layers after layer i that it accepts; returns the layer after them.
size_t Sequential::epilogue_after(size_t i, Epilogue& e) const {
  static const bool fuse = knobs::flag("LOUPE_FUSE");
  const auto& layers = children();
  size_t j = i + 1;
  while (fuse && j < layers.size() && fold_epilogue(*layers[i].second, *layers[j].second, e)) ++j;
  return j;
}

// A stack from layer i that ops/fused/mlp.h fuses (one to three Linear + ReLU (+ Dropout), then a Linear
// with nothing folded into it), run as one op where its kernels take it: then h is its output and
// the result the layer after it. Otherwise i, having run nothing (h may now be autocast, as the
// stack's first Linear would have it).
size_t Sequential::run_mlp(size_t i, Tensor& h) {
  static const bool fuse = knobs::flag("LOUPE_FUSE") && knobs::flag("LOUPE_FUSE_MLP");
  const auto& layers = children();
  if (!fuse || !h.device().is_cuda() || compute_dtype() == DType::f32) return i;
  std::vector<std::pair<Linear*, Epilogue>> run;
  size_t j = i;
  while (j < layers.size() && run.size() < size_t(kMlpMaxLayers)) {
    auto* lin = dynamic_cast<Linear*>(layers[j].second.get());
    if (!lin) break;
    Epilogue e;
    const size_t next = epilogue_after(j, e);
    const bool hidden = e.act == Act::Relu, head = !e.act && !e.has_dropout;
    if (!hidden && !head) break;
    run.emplace_back(lin, e);
    j = next;
    if (head) break;
  }
  if (run.size() < 2 || run.back().second.act || run.front().first->out_features < 8) return i;
  // Only now the 16-bit copies (views into the trainer's compute copy: no op) and the input's cast,
  // which the first Linear would make anyway: nothing is cast for a model with no such stack.
  std::vector<MlpLayer> stack;
  std::string name;
  for (const auto& [lin, e] : run) {
    stack.push_back(MlpLayer{autocast(lin->weight), lin->bias.defined() ? autocast(lin->bias) : Tensor(),
                             e.act.has_value(), e.dropout});
    name += (name.empty() ? "" : "+") + lin->range_name() + e.range_name;
  }
  h = autocast(h);
  if (!mlp_fused_fits(h, stack)) return i;
  NvtxRange r(name.c_str(), RangeKind::Module);
  h = mlp(h, stack, is_training());
  return j;
}

// Layer i a channels-last Conv2d with a bias and ReLU after it, then a MaxPool2d (and a Dropout
// after that): run as conv2d_relu_max_pool where it takes them, the relu's and the bias's
// backward in the pooling's pass; then h is the pooling's output and the result the layer after
// it. Otherwise i, having run nothing (h may now be autocast and channels-last, as the Conv2d
// would make it).
size_t Sequential::run_conv_pool(size_t i, Tensor& h) {
  static const bool fuse = knobs::flag("LOUPE_FUSE");
  const auto& layers = children();
  auto* conv = dynamic_cast<Conv2d*>(layers[i].second.get());
  if (!fuse || !conv || !conv->bias.defined() || !h.device().is_cuda() ||
      conv->memory_format() != MemoryFormat::ChannelsLast)
    return i;
  Epilogue e, pe;
  const size_t j = epilogue_after(i, e);
  auto* pool = j < layers.size() ? dynamic_cast<MaxPool2d*>(layers[j].second.get()) : nullptr;
  if (e.act != Act::Relu || e.has_dropout || !pool) return i;
  const size_t after = epilogue_after(j, pe);
  Tensor x = conv->input(h), w = autocast(conv->weight), b = autocast(conv->bias);
  h = x;
  const Pool2dParams pp = pool->params();
  if (!conv2d_relu_max_pool_fits(x, w, b, pp)) return i;
  const std::string name = conv->range_name() + e.range_name + "+" + pool->range_name() + pe.range_name;
  NvtxRange r(name.c_str(), RangeKind::Module);
  h = conv2d_relu_max_pool(x, w, b, conv->params(), pp, pe.dropout, true);
  return after;
}

Module::InputLayout Sequential::input_layout() const {
  return children().empty() ? InputLayout{} : children().front().second->input_layout();
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  const auto& layers = children();
  for (size_t i = 0; i < layers.size();) {
    if (const size_t after = run_mlp(i, h); after != i) {
      i = after;
      continue;
    }
    if (const size_t after = run_conv_pool(i, h); after != i) {
      i = after;
      continue;
    }
    Module& m = *layers[i].second;
    Epilogue e;
    const size_t j = epilogue_after(i, e);
    h = e.absorbed ? m.call_fused(h, e) : m(h);  // each opens the layer's NVTX range
    i = j;
  }
  return h;
}

Embedding::Embedding(int64_t v, int64_t dim) : num_embeddings(v), embedding_dim(dim) {
  LOUPE_CHECK(v > 0 && dim > 0, "Embedding needs a positive vocabulary size and dimension, got ", v, " and ", dim);
  Tensor w = empty(Shape{v, dim}, DType::f32, kCPU);
  uniform_(w, -0.05, 0.05);
  weight = register_parameter("weight", w);
}

// The lookup reads the float32 table (a 1.2M-row table is never cast whole), and its output stays
// float32: the next layer casts what it reads (an LSTM its input, fastText's Dense the mean over
// the sequence). Cast here, fastText's [N, 400, 50] activation took a cast each way, its gradient
// written out whole by the backward cast, a sizeable share of the fp16 step (lab/benchmarks.md,
// "The step as one CUDA graph, and fewer kernels").
Tensor Embedding::forward(const Tensor& ids) { return embedding(ids, weight); }

std::string Embedding::type_name() const {
  return "Embedding(" + std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) + ")";
}

}  // namespace loupe::nn
