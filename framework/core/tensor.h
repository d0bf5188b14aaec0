// Tensor: a typed, shaped, strided view of a Storage, with autograd bookkeeping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace loupe {

namespace autograd { struct Node; }

// How a 4-D [N, C, H, W] tensor lies in memory. Contiguous: row-major NCHW. ChannelsLast: NHWC,
// strides {H*W*C, 1, W*C, C}, the layout cuDNN's tensor-core convolutions read without transposing.
// The shape (and so indexing, broadcasting, reshape) is NCHW either way; only the strides differ.
// Ops that have no channels-last kernel convert with contiguous(); those that do (convolution,
// pooling, bias_add, activations, dropout) keep the format of their input.
enum class MemoryFormat { Contiguous, ChannelsLast };
const char* memory_format_name(MemoryFormat f);
// The strides of a tensor of shape `s` in format `f` (ChannelsLast needs 4 dimensions).
Shape strides_for(const Shape& s, MemoryFormat f);

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape, strides;
  DType dtype = DType::f32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // the node that produced this tensor (null for leaves)
  int output_nr = 0;                        // which output of grad_fn
  std::shared_ptr<autograd::Node> grad_accumulator;  // leaves only, created on first use
  std::string name;                         // parameters: their path in the module tree
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int dim() const { return impl_->shape.size(); }
  int64_t size(int d) const;
  int64_t numel() const { return impl_->shape.numel(); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage ? impl_->storage->device() : kCPU; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_contiguous() const;
  bool is_contiguous(MemoryFormat f) const;
  // ChannelsLast for a 4-D NHWC tensor that is not also NCHW-contiguous (as when C or H*W is 1),
  // else Contiguous (which a non-contiguous view is not: check is_contiguous(memory_format())).
  MemoryFormat memory_format() const;
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  void* data_ptr() const;
  template <class T> T* data() const { return static_cast<T*>(data_ptr()); }

  // A broadcast view (stride 0) of this tensor; records no autograd. The views that do (reshape,
  // transpose, slice, contiguous, clone, to) are ops: ops/view.h.
  Tensor expand(const Shape& s) const;
  Tensor detach() const;  // same data, no history

  // Autograd bookkeeping (the graph is recorded by ops; backward() is in autograd/node.h).
  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
  void set_grad(const Tensor& g) { impl_->grad = g.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl_->grad_fn; }
  const std::string& name() const { return impl_->name; }

  // Host access (copies from the device and waits: not for use inside a training step).
  template <class T> std::vector<T> to_vector() const;
  double item() const;  // one element, converted to double
  std::string str(int max_elems = 8) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Factories.
Tensor empty(const Shape& s, DType t = DType::f32, Device d = kCPU);
Tensor empty(const Shape& s, DType t, Device d, MemoryFormat f);
// Same shape, dtype, device and memory format as x (x dense).
Tensor empty_like(const Tensor& x);
Tensor empty_pinned(const Shape& s, DType t);  // page-locked host memory where CUDA is present
Tensor zeros(const Shape& s, DType t = DType::f32, Device d = kCPU);
Tensor ones(const Shape& s, DType t = DType::f32, Device d = kCPU);
Tensor full(const Shape& s, double value, DType t = DType::f32, Device d = kCPU);
Tensor scalar_tensor(double value, DType t = DType::f32, Device d = kCPU);
template <class T> Tensor from_vector(const std::vector<T>& v, const Shape& s, Device d = kCPU);
// A view of `s` with `strides` at element `offset` into `base`'s storage (no autograd).
Tensor as_strided(const Tensor& base, const Shape& s, const Shape& strides, int64_t offset);

// In-place, no autograd: copies src into dst (same shape, same dtype; any strides or devices).
void copy_(const Tensor& dst, const Tensor& src);
// No autograd: a contiguous copy of x on device d in dtype t (x itself when it already is one).
// The recording versions are ops: contiguous(), to() in ops/view.h.
Tensor to_contiguous(const Tensor& x, Device d, DType t);
// No autograd: dst = a + b, same shape, one device, any strides (dst dense; dst may be a); dst and
// a of one floating dtype, b of any (a float16 gradient added into a float32 one). The autograd engine sums gradients with it; ops' add() is the recording one.
void add_out(const Tensor& dst, const Tensor& a, const Tensor& b);
// In-place, no autograd: dst = value everywhere.
void fill_(const Tensor& dst, double value);

}  // namespace loupe
