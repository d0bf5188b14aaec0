#include "core/tensor.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/copy.h"
#include "core/cuda_runtime.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/nvtx.h"

namespace loupe {

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
  kernels<CopyKernels>(dst.device()).fill(current_context(), dst, value);
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
  return to_contiguous(host, d, t);
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
      kernels<CopyKernels>(dst.device()).copy_strided(current_context(), dst, src);
    }
    return;
  }
  // Across devices: stage through contiguous tensors on each side.
  Tensor s = to_contiguous(src, src.device(), src.dtype());
  Tensor d = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
  CopyKind kind = d.is_cuda() ? CopyKind::HostToDevice : CopyKind::DeviceToHost;
  NvtxRange range(kind == CopyKind::HostToDevice ? "h2d copy" : "d2h copy");
  cuda_runtime()->copy(d.data_ptr(), s.data_ptr(), d.nbytes(), kind);
  if (!d.same(dst)) copy_(dst, d);
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
  return as_strided(*this, s, st, impl_->offset);
}

Tensor to_contiguous(const Tensor& x, Device d, DType t) {
  Tensor out = x;
  if (out.device() != d || !out.is_contiguous()) {  // copy_ stages a strided source across devices
    Tensor c = empty(x.shape(), x.dtype(), d);
    copy_(c, out);
    out = c;
  }
  if (out.dtype() != t) {
    Tensor c = empty(x.shape(), t, d);
    if (c.numel() > 0) kernels<CopyKernels>(d).cast(current_context(), c, out);
    out = c;
  }
  return out;
}

void add_out(const Tensor& dst, const Tensor& a, const Tensor& b) {
  LOUPE_CHECK(dst.shape() == a.shape() && dst.shape() == b.shape(), "add_out: shapes ", dst.shape().str(), ", ",
              a.shape().str(), " and ", b.shape().str(), " differ");
  LOUPE_CHECK(dst.dtype() == a.dtype() && is_floating(dst.dtype()) && is_floating(b.dtype()),
              "add_out needs floating dtypes, dst's and a's the same; got ", dtype_name(dst.dtype()), ", ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  LOUPE_CHECK(dst.device() == a.device() && dst.device() == b.device(), "add_out: the tensors are on different devices");
  LOUPE_CHECK(dst.is_contiguous(dst.memory_format()), "add_out needs a dense destination");
  if (dst.numel() == 0) return;
  // The kernel walks the three buffers in step: an operand laid out otherwise is copied to dst's layout.
  auto like_dst = [&](const Tensor& x) {
    if (x.strides() == dst.strides()) return x;
    Tensor c = empty(dst.shape(), x.dtype(), dst.device(), dst.memory_format());
    copy_(c, x);
    return c;
  };
  kernels<CopyKernels>(dst.device()).add(current_context(), dst, like_dst(a), like_dst(b));
  add_flops(double(dst.numel()));
}

Tensor Tensor::detach() const { return as_strided(*this, shape(), strides(), impl_->offset); }

Tensor& Tensor::requires_grad_(bool on) {
  LOUPE_CHECK(!impl_->grad_fn, "requires_grad_() is for leaf tensors; this one was computed by an op");
  LOUPE_CHECK(!on || is_floating(dtype()), "only floating-point tensors can require gradients");
  impl_->requires_grad = on;
  return *this;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  DType want = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, double> ? DType::f64
             : std::is_same_v<T, int32_t> ? DType::i32 : DType::u8;
  Tensor h = to_contiguous(*this, kCPU, want);
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
