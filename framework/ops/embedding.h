// Embedding lookup: rows of a [V, E] table picked by token ids, with a deterministic
// scatter-add backward (training runs stay bit-reproducible on the GPU too).
#pragma once
#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// out[..., :] = weight[ids[...], :]. ids: any shape, int32 or float32/float64 holding integers
// (the data loader delivers token ids as floats, exact below 2^24); weight [V, E] floating.
// Output ids.shape + [E], weight's dtype and device. Gradient to weight only: repeated ids add up.
// The CPU throws on an id that is not an integer in [0, V); CUDA cannot check without waiting
// for the device, so such an id gives a zero row there and no gradient (the dataset builders
// check their ids).
Tensor embedding(const Tensor& ids, const Tensor& weight);

// out[..., c] = 1 where ids[...] == c, else 0, for c in [0, classes): the rows of a classes x
// classes identity without building one (char_lstm's one-hot characters: a dense identity for a
// text of 60,000 distinct characters would take 14.4 GB). ids as for embedding, with the same
// checks (the CPU throws on a bad id; CUDA gives it a row of zeros); out ids.shape + [classes]
// of a floating dtype. No gradient.
Tensor one_hot(const Tensor& ids, int64_t classes, DType dtype = DType::f32);

// Where the gradient row of position i starts in gy's data, in elements: the n positions read as
// [n / Q, Q] with strides (sP, sQ), the E columns of a row contiguous. A contiguous gy is Q = 1,
// sP = E; the gradient of a mean over T positions, expanded and not copied, is Q = T, sP = E, sQ = 0.
struct EmbeddingGradRows {
  int64_t Q = 1, sP = 0, sQ = 0;
  int64_t offset(int64_t i) const { return i / Q * sP + i % Q * sQ; }
};

struct EmbeddingKernels {
  // ids contiguous [n]; weight contiguous [V, E]; out contiguous [n, E].
  void (*forward)(const ExecContext& ctx, const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n,
                  int64_t E);
  // gw [V, E] = sum over positions i with ids[i] == v of gy's row i (laid out as `rows` says):
  // overwrites all of gw, or with `accumulate` adds each row's sum to what gw holds and touches
  // only the rows some id selects. found_inf (with `accumulate` only; null: no check): a float on
  // gw's device set to 1 when a value written into gw is inf or NaN (the row's final value, so an
  // inf in gy, an overflow of the sum and a non-finite value gw held are all caught), and never
  // written otherwise (autograd/source_check.h).
  void (*backward)(const ExecContext& ctx, const Tensor& gw, const Tensor& ids, const Tensor& gy,
                   const EmbeddingGradRows& rows, int64_t n, int64_t E, bool accumulate, float* found_inf);
  // ids contiguous [n]; out contiguous [n, C], every element written.
  void (*one_hot)(const ExecContext& ctx, const Tensor& out, const Tensor& ids, int64_t n, int64_t C);
};

}  // namespace loupe
