#include "core/precision.h"

#include <atomic>

#include "core/error.h"

namespace loupe {

namespace {
std::atomic<Precision> g_precision{Precision::FP32};
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
  if (name == "fp16" || name == "bf16")
    throw Error("--precision " + name + ": mixed precision (fp16, bf16) is not implemented yet; use fp32 or tf32");
  throw Error("--precision: unknown precision '" + name + "'; the choices are fp32 and tf32");
}

void set_precision(Precision p) {
  LOUPE_CHECK(p == Precision::FP32 || p == Precision::TF32, "precision ", precision_name(p), " is not implemented yet");
  g_precision.store(p);
}

Precision precision() { return g_precision.load(); }

}  // namespace loupe
