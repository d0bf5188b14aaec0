// The arithmetic precision of a run (--precision), process-wide.
//  - fp32: IEEE float32 throughout; tensor cores are not used for float32 (cuBLAS default math,
//    cuDNN FMA math).
//  - tf32: float32 tensors, but cuBLAS GEMMs and cuDNN convolutions may round their inputs to
//    TF32 (a 10-bit mantissa) on tensor cores, accumulating in float32. PyTorch does this for
//    convolutions by default (torch.backends.cudnn.allow_tf32) and, optionally, for GEMMs
//    (torch.backends.cuda.matmul.allow_tf32); loupe does it for both or for neither.
//  - fp16, bf16: mixed precision, not implemented yet.
// Only the GPU has tensor cores: tf32 on the CPU is refused, never silently fp32.
#pragma once
#include <string>

namespace loupe {

enum class Precision { FP32, TF32, FP16, BF16 };

const char* precision_name(Precision p);  // "fp32", "tf32", "fp16", "bf16"
// From a name; an unknown or unimplemented one is an Error naming the choices.
Precision parse_precision(const std::string& name);

void set_precision(Precision p);
Precision precision();

}  // namespace loupe
