// The arithmetic precision of a run (--precision). It is carried by the trainer
// (train::TrainerOptions::precision), which opens a PrecisionScope around its steps and its
// evaluation; the ops read it where they dispatch and hand it to their kernels in an ExecContext
// (core/exec_context.h), which choose cuBLAS's and cuDNN's math from it. There is no
// process-wide setting: two trainers in one process (loupe bench) each keep their own.
//  - fp32: IEEE float32 throughout; tensor cores are not used for float32 (cuBLAS default math,
//    cuDNN FMA math).
//  - tf32: float32 tensors, but cuBLAS GEMMs and cuDNN convolutions may round their inputs to
//    TF32 (a 10-bit mantissa) on tensor cores, accumulating in float32. PyTorch does this for
//    convolutions by default (torch.backends.cudnn.allow_tf32) and, optionally, for GEMMs
//    (torch.backends.cuda.matmul.allow_tf32); loupe does it for both or for neither.
//  - fp16, bf16: mixed precision (GPU only). Parameters, their gradients and the optimizer stay
//    float32 (the master weights); layers cast their input and weights to compute_dtype() on the
//    fly (nn::autocast), so activations are 16-bit and GEMMs, convolutions and LSTMs run on tensor
//    cores with float32 accumulation; losses, reductions' accumulators and batch-norm statistics
//    stay float32. fp16 adds dynamic loss scaling (optim/grad_scaler.h); bf16 has float32's range
//    and needs none.
// Only the GPU has tensor cores: tf32, fp16 and bf16 on the CPU are refused, never silently fp32.
#pragma once
#include <string>

#include "core/dtype.h"

namespace loupe {

enum class Precision { FP32, TF32, FP16, BF16 };

const char* precision_name(Precision p);  // "fp32", "tf32", "fp16", "bf16"
// fp16 and bf16: the mixed-precision modes (16-bit activations, tensor cores).
inline bool is_16bit(Precision p) { return p == Precision::FP16 || p == Precision::BF16; }
// From a name; an unknown or unimplemented one is an Error naming the choices.
Precision parse_precision(const std::string& name);

// The precision in effect on this thread: the innermost live PrecisionScope's, else fp32.
Precision precision();
// Sets this thread's precision while it lives (scopes nest; the previous one returns after it).
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision prev_;
};
// Why precision p cannot run on device d ("" when it can): tf32, fp16 and bf16 are GPU modes;
// tf32 and bf16 need compute capability 8.0, fp16 7.0 (tensor cores).
std::string precision_unsupported(Precision p, Device d);
// The dtype layers compute in: float16 for fp16, bfloat16 for bf16, else float32.
DType compute_dtype(Precision p);
inline DType compute_dtype() { return compute_dtype(precision()); }

}  // namespace loupe
