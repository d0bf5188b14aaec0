// loupe peak: the GPU's FP32 peak, measured and from its datasheet.
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "instrument/peak.h"
#include "cli/commands.h"

namespace loupe::cli {

int cmd_peak(const Options& o) {
  Device dev = pick_device(o);
  if (!dev.is_cuda()) throw Error("loupe peak measures a GPU; none is in use (--device cuda)");
  std::string name = cuda_runtime()->device_name(), why;
  std::printf("device  %s\n", name.c_str());
  auto m = instrument::measure_gpu_peak(&why);
  if (!m) throw Error("cannot measure: " + why);
  auto sheet = instrument::datasheet_peak(name, Precision::FP32);
  std::printf("fp32 FMA loop   %7.1f TFLOP/s\nfp32 SGEMM 8192 %7.1f TFLOP/s\n", m->fma_tflops, m->sgemm_tflops);
  if (sheet) std::printf("%s: %.1f TFLOP/s (FMA loop reaches %.0f%% of it)\n", sheet->source.c_str(), sheet->tflops,
                         100 * m->fma_tflops / sheet->tflops);
  else std::printf("no datasheet entry for this GPU\n");
  return 0;
}

}  // namespace loupe::cli
