// A Linear layer and its epilogue as one op: y = drop(act(x @ w^T + b)) (ops/bias_act.h for the
// epilogue). One autograd node for the product and the epilogue lets the backward hand the bias
// gradient to the weight-gradient GEMM: on CUDA, cuBLASLt's BGRADB epilogue sums the rows of the
// incoming gradient while it reads them for the product, so the bias costs no kernel of its own;
// and with no activation or dropout the forward adds the bias in the GEMM's epilogue too. Where
// the library has no such kernel, and on the CPU, the pieces are the separate ops' (matmul's GEMMs,
// bias_act's kernels), with the same results bit for bit.
#pragma once
#include <optional>

#include "core/tensor.h"
#include "ops/activation.h"

namespace loupe {

// x [N, in], w [out, in], b [out] or undefined, all of one floating dtype and device (16-bit on
// CUDA only, as matmul). act and p as bias_act's: dropout (applied when `training`) follows relu
// or no activation.
Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& b, std::optional<Act> act, double p,
                  bool training);

}  // namespace loupe
