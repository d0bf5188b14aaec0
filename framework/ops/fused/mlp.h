// A stack of Linear layers as one op: hidden layers Linear + ReLU (+ dropout), then a narrow head
// (a classifier's logits), y = head(drop(relu(... drop(relu(x W0^T + b0)) ...))).
//
// On CUDA (compute capability 9.0 or newer, 16-bit) where the shapes fit, the forward is one kernel
// and the backward two, with the activations kept on chip between layers: a cluster of 8 blocks
// takes 16 rows of the batch, each block an eighth of every hidden layer's columns (or, for a wide
// input, an eighth of the first layer's k), and the blocks exchange their slices through
// distributed shared memory (ops/fused/mlp_cuda.cu). Separately the same
// stack is a GEMM and an epilogue kernel per layer each way, each a kernel boundary and a round
// trip of its activation through memory: mnist_mlp's three layers took most of its step at batch
// 128 (lab/benchmarks.md, "The fused MLP"). Elsewhere, and where the shapes do not fit, mlp
// runs linear_act per layer. Both give the same dropout masks (the same draws, element i of a
// layer's [rows, width] output kept when philox_uniform(seed, offset, i) >= p); the sums' order
// differs, so they agree to float tolerance, not bit for bit.
#pragma once
#include <vector>

#include "core/exec_context.h"
#include "core/random.h"
#include "core/tensor.h"

namespace loupe {

struct MlpLayer {
  Tensor w, b;  // [out, in] and [out] (b may be undefined: then the stack runs unfused)
  bool relu = false;
  double p = 0;  // dropout after the ReLU, in training
};

// Whether the fused kernels take this stack: a CUDA backend with them (compute capability >= 9.0,
// and the batch's clusters resident at once: up to 240 rows on an H200),
// x [rows, in] and every w, b contiguous in float16 or bfloat16, 1-3 hidden layers with ReLU and
// widths 128, 256, 384 or 512, a head of 1-16 outputs without activation or dropout, every bias
// defined, and `in` a multiple of 8 up to 1024 or, a wide input (a CNN's flattened features), a
// multiple of 64 up to 16384. x may need a gradient (a dense head after convolutions).
// LOUPE_FUSE_MLP=0 turns them off (for comparison).
constexpr int kMlpStreamedInMax = 1024;  // wider inputs split the first layer's k across a cluster
constexpr int kMlpWideInMax = 16384;
bool mlp_fused_fits(const Tensor& x, const std::vector<MlpLayer>& layers);

// The stack applied to x; dropout applies when `training`.
Tensor mlp(const Tensor& x, const std::vector<MlpLayer>& layers, bool training);

// ---- the backend's interface --------------------------------------------------------------------
constexpr int kMlpMaxLayers = 4;  // three hidden layers and the head
struct MlpArgs {
  int rows = 0, layers = 0, in = 0;  // the batch, the layer count (hidden + head), x's width
  int width[kMlpMaxLayers] = {};     // each layer's outputs
  DType dtype = DType::f16;
  const void* x = nullptr;
  const void* w[kMlpMaxLayers] = {};
  const void* b[kMlpMaxLayers] = {};
  void* h[kMlpMaxLayers - 1] = {};  // the hidden layers' outputs [rows, width], saved for the backward
  void* y = nullptr;                // the head's [rows, width[layers - 1]]
  float p[kMlpMaxLayers - 1] = {};  // dropout probabilities (0: none)
  RngDraw rng[kMlpMaxLayers - 1];   // their draws
  // The backward: gy [rows, head width] in; dz (the hidden layers' pre-activation gradients,
  // scratch [rows, width]), gw and gb (each layer's, in dtype) out.
  const void* gy = nullptr;
  void* dz[kMlpMaxLayers - 1] = {};
  void* gw[kMlpMaxLayers] = {};
  void* gb[kMlpMaxLayers] = {};
  void* gx = nullptr;  // x's gradient [rows, in] out, = dz[0] W0 (null: x needs none)
};

struct MlpKernels {
  // Whether the device runs the kernels for this shape (compute capability, clusters' residency).
  bool (*fits)(const ExecContext& ctx, const MlpArgs& a);
  void (*forward)(const ExecContext& ctx, const MlpArgs& a);
  void (*backward)(const ExecContext& ctx, const MlpArgs& a);
};

}  // namespace loupe
