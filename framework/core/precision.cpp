#include "core/precision.h"

#include "core/cuda_runtime.h"
#include "core/error.h"

namespace loupe {

namespace {
thread_local Precision t_precision = Precision::FP32;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::FP32;
  if (name == "tf32") return Precision::TF32;
  if (name == "fp16") return Precision::FP16;
  if (name == "bf16") return Precision::BF16;
  throw Error("--precision: unknown precision '" + name + "'; the choices are fp32, tf32, fp16 and bf16");
}

PrecisionScope::PrecisionScope(Precision p) : prev_(t_precision) { t_precision = p; }
PrecisionScope::~PrecisionScope() { t_precision = prev_; }

std::string precision_unsupported(Precision p, Device d) {
  if (p == Precision::FP32) return "";
  const std::string name = precision_name(p);
  if (!d.is_cuda())
    return "--precision " + name + " is a GPU mode (tensor cores); on the CPU use fp32";
  int cc = cuda_runtime()->compute_capability(), need = p == Precision::FP16 ? 70 : 80;
  if (cc < need)
    return "--precision " + name + " needs compute capability " + std::to_string(need / 10) + ".0 or newer; this GPU has " +
           std::to_string(cc / 10) + "." + std::to_string(cc % 10) + "; use fp32";
  return "";
}

DType compute_dtype(Precision p) {
  return p == Precision::FP16 ? DType::f16 : p == Precision::BF16 ? DType::bf16 : DType::f32;
}

Precision precision() { return t_precision; }

}  // namespace loupe
