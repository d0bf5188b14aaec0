// Views and copies that record autograd: reshape, transpose, slice, and the copies that change a
// tensor's layout, device or dtype. Views share storage with their input; the backward of each is
// the inverse view (or a copy back). Tensor itself (core/tensor.h) knows only the views that need
// no gradient: expand() and detach().
#pragma once
#include "core/tensor.h"

namespace loupe {

// A view when x is contiguous, else a contiguous copy reshaped.
Tensor reshape(const Tensor& x, const Shape& s);
// Dimensions start_dim.. folded into one.
Tensor flatten(const Tensor& x, int start_dim = 1);
Tensor transpose(const Tensor& x, int d0, int d1);
// Elements [start, end) of dimension d.
Tensor slice(const Tensor& x, int d, int64_t start, int64_t end);
// x when contiguous, else a contiguous copy (autograd: identity).
Tensor contiguous(const Tensor& x);
// A copy in format f unless x already is so (autograd: identity); where x's memory order already
// fits f (one channel or one pixel), x restrided: the result's memory_format() is f.
Tensor contiguous(const Tensor& x, MemoryFormat f);
// Dense in one of the two formats: x when it is, else contiguous(x). Elementwise ops run over the
// raw buffer of such a tensor and give their result the same strides.
Tensor dense(const Tensor& x);
// A contiguous copy, always (autograd: identity).
Tensor clone(const Tensor& x);
// A copy on device d (x itself when already there); the gradient is copied back.
Tensor to(const Tensor& x, Device d);
// A copy in dtype t (x itself when already so); the gradient is cast back (floating t only).
Tensor to(const Tensor& x, DType t);

}  // namespace loupe
