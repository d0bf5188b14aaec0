#include "core/tensor.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "instrument/nvtx.h"
#include "ops/activation.h"
#include "ops/copy.h"
#include "ops/linalg.h"
#include "ops/reduce.h"

namespace loupe {

using autograd::Node;

int64_t Tensor::size(int d) const { return shape()[wrap_dim(d, dim())]; }

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape()[i] != 1 && strides()[i] != expect) return false;
    expect *= shape()[i];
  }
  return true;
}

const char* memory_format_name(MemoryFormat f) { return f == MemoryFormat::ChannelsLast ? "channels-last" : "contiguous"; }

Shape strides_for(const Shape& s, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous) return contiguous_strides(s);
  LOUPE_CHECK(s.size() == 4, "channels-last needs a 4-D [N, C, H, W] shape, got ", s.str());
  int64_t C = s[1], H = s[2], W = s[3];
  return Shape{H * W * C, 1, W * C, C};
}

bool Tensor::is_contiguous(MemoryFormat f) const {
  if (f == MemoryFormat::Contiguous) return is_contiguous();
  if (dim() != 4) return false;
  Shape want = strides_for(shape(), f);
  for (int i = 0; i < 4; ++i)
    if (shape()[i] != 1 && strides()[i] != want[i]) return false;
  return true;
}

MemoryFormat Tensor::memory_format() const {
  // Exact strides decide, so that a channels-last tensor with C == 1 or H == W == 1 (whose memory
  // order is NCHW too) still says what it was made as; contiguous(ChannelsLast) sets them so.
  if (dim() == 4 && strides() == strides_for(shape(), MemoryFormat::ChannelsLast) &&
      strides() != contiguous_strides(shape()))
    return MemoryFormat::ChannelsLast;
  return MemoryFormat::Contiguous;
}

void* Tensor::data_ptr() const {
  if (!impl_->storage) return nullptr;
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(element_size());
}

Tensor empty(const Shape& s, DType t, Device d) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(s.numel()) * dtype_size(t), d);
  impl->shape = s;
  impl->strides = contiguous_strides(s);
  impl->dtype = t;
  return Tensor(impl);
}

Tensor empty(const Shape& s, DType t, Device d, MemoryFormat f) {
  Tensor x = empty(s, t, d);
  if (f == MemoryFormat::ChannelsLast) x.impl()->strides = strides_for(s, f);
  return x;
}

Tensor empty_like(const Tensor& x) { return empty(x.shape(), x.dtype(), x.device(), x.memory_format()); }

Tensor empty_pinned(const Shape& s, DType t) {
  Tensor x = empty(Shape{}, t, kCPU);
  x.impl()->storage = std::make_shared<Storage>(size_t(s.numel()) * dtype_size(t), kCPU, /*pinned=*/true);
  x.impl()->shape = s;
  x.impl()->strides = contiguous_strides(s);
  return x;
}

Tensor as_strided(const Tensor& base, const Shape& s, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->shape = s;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(impl);
}

void fill_(const Tensor& dst, double value) {
  LOUPE_CHECK(dst.is_contiguous(), "fill_ needs a contiguous tensor");
  if (dst.numel() == 0) return;
  if (value == 0.0) {  // all dtypes store zero as zero bytes
    if (dst.is_cuda()) cuda_runtime()->memset_zero(dst.data_ptr(), dst.nbytes());
    else std::memset(dst.data_ptr(), 0, dst.nbytes());
    return;
  }
  kernels<CopyKernels>(dst.device()).fill(dst, value);
}

Tensor zeros(const Shape& s, DType t, Device d) { Tensor x = empty(s, t, d); fill_(x, 0); return x; }
Tensor ones(const Shape& s, DType t, Device d) { return full(s, 1.0, t, d); }
Tensor full(const Shape& s, double v, DType t, Device d) { Tensor x = empty(s, t, d); fill_(x, v); return x; }
Tensor scalar_tensor(double v, DType t, Device d) { return full(Shape{}, v, t, d); }

template <class T>
Tensor from_vector(const std::vector<T>& v, const Shape& s, Device d) {
  LOUPE_CHECK(int64_t(v.size()) == s.numel(), "from_vector: ", v.size(), " values for shape ", s.str());
  DType t = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, double> ? DType::f64
          : std::is_same_v<T, int32_t> ? DType::i32 : DType::u8;
  Tensor host = empty(s, t, kCPU);
  if (!v.empty()) std::memcpy(host.data_ptr(), v.data(), v.size() * sizeof(T));
  return d.is_cpu() ? host : host.to(d);
}
template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, Device);

void copy_(const Tensor& dst, const Tensor& src) {
  LOUPE_CHECK(dst.shape() == src.shape(), "copy_: shapes ", dst.shape().str(), " and ", src.shape().str(), " differ");
  LOUPE_CHECK(dst.dtype() == src.dtype(), "copy_: dtypes ", dtype_name(dst.dtype()), " and ", dtype_name(src.dtype()),
              " differ; use .to(dtype) first");
  if (dst.numel() == 0) return;
  if (dst.device() == src.device()) {
    if (dst.is_contiguous() && src.is_contiguous()) {
      if (dst.is_cuda()) cuda_runtime()->copy(dst.data_ptr(), src.data_ptr(), dst.nbytes(), CopyKind::DeviceToDevice);
      else std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    } else {
      kernels<CopyKernels>(dst.device()).copy_strided(dst, src);
    }
    return;
  }
  // Across devices: stage through contiguous tensors on each side.
  Tensor s = src.contiguous();
  Tensor d = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
  CopyKind kind = d.is_cuda() ? CopyKind::HostToDevice : CopyKind::DeviceToHost;
  instrument::NvtxRange range(kind == CopyKind::HostToDevice ? "h2d copy" : "d2h copy");
  cuda_runtime()->copy(d.data_ptr(), s.data_ptr(), d.nbytes(), kind);
  if (!d.same(dst)) copy_(dst, d);
}

// ---- views and their backward ------------------------------------------------------------

namespace {
struct ReshapeBackward : Node {
  Shape in_shape;
  const char* name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0].reshape(in_shape)}; }
};
struct TransposeBackward : Node {
  int d0, d1;
  const char* name() const override { return "TransposeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0].transpose(d0, d1)}; }
};
struct SliceBackward : Node {
  Shape in_shape;
  int dim;
  int64_t start, end;
  const char* name() const override { return "SliceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = zeros(in_shape, g[0].dtype(), g[0].device());
    copy_(gx.slice(dim, start, end), g[0]);
    return {gx};
  }
};
struct IdentityBackward : Node {  // contiguous(), clone()
  const char* name() const override { return "CopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0]}; }
};
struct ToDeviceBackward : Node {
  Device from;
  const char* name() const override { return "ToDeviceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0].to(from)}; }
};
struct ToDtypeBackward : Node {
  DType from;
  const char* name() const override { return "ToDtypeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0].to(from)}; }
};

Tensor view_of(const Tensor& x, const Shape& s, const Shape& st, int64_t offset) {
  return as_strided(x, s, st, offset);
}
}  // namespace

Tensor Tensor::reshape(const Shape& req) const {
  Shape s = req;
  LOUPE_CHECK(s.numel() == numel(), "cannot reshape ", shape().str(), " (", numel(), " elements) to ", s.str());
  Tensor src = is_contiguous() ? *this : contiguous();
  Tensor out = view_of(src, s, contiguous_strides(s), src.impl()->offset);
  if (autograd::needs_grad({this})) {
    auto n = std::make_shared<ReshapeBackward>();
    n->in_shape = shape();
    autograd::record(n, {this}, {&out});
  }
  return out;
}

Tensor Tensor::flatten(int start_dim) const {
  int sd = wrap_dim(start_dim, dim());
  Shape s;
  for (int i = 0; i < sd; ++i) s.push_back(shape()[i]);
  int64_t rest = 1;
  for (int i = sd; i < dim(); ++i) rest *= shape()[i];
  s.push_back(rest);
  return reshape(s);
}

Tensor Tensor::transpose(int d0, int d1) const {
  d0 = wrap_dim(d0, dim());
  d1 = wrap_dim(d1, dim());
  Shape s = shape(), st = strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  Tensor out = view_of(*this, s, st, impl_->offset);
  if (autograd::needs_grad({this})) {
    auto n = std::make_shared<TransposeBackward>();
    n->d0 = d0;
    n->d1 = d1;
    autograd::record(n, {this}, {&out});
  }
  return out;
}

Tensor Tensor::slice(int d, int64_t start, int64_t end) const {
  d = wrap_dim(d, dim());
  LOUPE_CHECK(0 <= start && start <= end && end <= shape()[d], "slice [", start, ", ", end, ") is out of range for size ",
              shape()[d], " of dimension ", d);
  Shape s = shape();
  s[d] = end - start;
  Tensor out = view_of(*this, s, strides(), impl_->offset + start * strides()[d]);
  if (autograd::needs_grad({this})) {
    auto n = std::make_shared<SliceBackward>();
    n->in_shape = shape();
    n->dim = d;
    n->start = start;
    n->end = end;
    autograd::record(n, {this}, {&out});
  }
  return out;
}

Tensor Tensor::expand(const Shape& s) const {
  LOUPE_CHECK(s.size() >= dim(), "expand: cannot expand ", shape().str(), " to ", s.str());
  Shape st;
  int lead = s.size() - dim();
  for (int i = 0; i < s.size(); ++i) {
    int j = i - lead;
    if (j < 0) { st.push_back(0); continue; }
    LOUPE_CHECK(shape()[j] == s[i] || shape()[j] == 1, "expand: cannot expand ", shape().str(), " to ", s.str());
    st.push_back(shape()[j] == s[i] ? strides()[j] : 0);
  }
  return view_of(*this, s, st, impl_->offset);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::contiguous(MemoryFormat f) const {
  if (f == MemoryFormat::Contiguous) return contiguous();
  if (memory_format() == f) return *this;
  Tensor out;
  if (is_contiguous(f)) {  // already in that memory order (C or H*W is 1): the same data, restrided
    out = as_strided(*this, shape(), strides_for(shape(), f), impl_->offset);
  } else {
    out = empty(shape(), dtype(), device(), f);
    copy_(out, *this);
  }
  if (autograd::needs_grad({this})) autograd::record(std::make_shared<IdentityBackward>(), {this}, {&out});
  return out;
}

Tensor Tensor::dense() const {
  return is_contiguous() || is_contiguous(MemoryFormat::ChannelsLast) ? *this : contiguous();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  copy_(out, *this);
  if (autograd::needs_grad({this})) autograd::record(std::make_shared<IdentityBackward>(), {this}, {&out});
  return out;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor out = empty(shape(), dtype(), d);
  copy_(out, *this);
  if (autograd::needs_grad({this})) {
    auto n = std::make_shared<ToDeviceBackward>();
    n->from = device();
    autograd::record(n, {this}, {&out});
  }
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape(), t, device());
  if (numel() > 0) kernels<CopyKernels>(device()).cast(out, src);
  if (autograd::needs_grad({this}) && is_floating(t)) {
    auto n = std::make_shared<ToDtypeBackward>();
    n->from = dtype();
    autograd::record(n, {this}, {&out});
  }
  return out;
}

Tensor Tensor::detach() const { return as_strided(*this, shape(), strides(), impl_->offset); }

Tensor& Tensor::requires_grad_(bool on) {
  LOUPE_CHECK(!impl_->grad_fn, "requires_grad_() is for leaf tensors; this one was computed by an op");
  LOUPE_CHECK(!on || is_floating(dtype()), "only floating-point tensors can require gradients");
  impl_->requires_grad = on;
  return *this;
}

void Tensor::backward(const Tensor& grad_output) const {
  Tensor g = grad_output;
  if (!g.defined()) {
    LOUPE_CHECK(numel() == 1, "backward() without a gradient needs a scalar; this tensor has shape ", shape().str());
    g = ones(shape(), dtype(), device());
  }
  autograd::run_backward(*this, g);
}

Tensor Tensor::relu() const { return loupe::relu(*this); }
Tensor Tensor::sigmoid() const { return loupe::sigmoid(*this); }
Tensor Tensor::tanh() const { return loupe::tanh(*this); }
Tensor Tensor::sum() const { return loupe::sum(*this); }
Tensor Tensor::mean() const { return loupe::mean(*this); }
Tensor Tensor::sum(int d, bool keepdim) const { return loupe::sum(*this, d, keepdim); }
Tensor Tensor::matmul(const Tensor& o) const { return loupe::matmul(*this, o); }

template <class T>
std::vector<T> Tensor::to_vector() const {
  DType want = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, double> ? DType::f64
             : std::is_same_v<T, int32_t> ? DType::i32 : DType::u8;
  NoGradGuard g;
  Tensor h = to(kCPU).to(want).contiguous();
  std::vector<T> v(size_t(h.numel()));
  if (!v.empty()) std::memcpy(v.data(), h.data_ptr(), v.size() * sizeof(T));
  return v;
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;

double Tensor::item() const {
  LOUPE_CHECK(numel() == 1, "item() needs a single element; shape is ", shape().str());
  return to_vector<double>()[0];
}

std::string Tensor::str(int max_elems) const {
  std::ostringstream s;
  s << "Tensor(" << shape().str() << ", " << dtype_name(dtype()) << ", " << device().str();
  if (numel() > 0 && dtype() != DType::f16 && dtype() != DType::bf16) {
    std::vector<double> v = to_vector<double>();
    s << ", [";
    for (int64_t i = 0; i < numel() && i < max_elems; ++i) s << (i ? ", " : "") << v[size_t(i)];
    if (numel() > max_elems) s << ", ...";
    s << "]";
  }
  s << ")";
  return s.str();
}

}  // namespace loupe
