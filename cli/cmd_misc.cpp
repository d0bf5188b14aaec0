// loupe models, loupe peak and loupe copybench.
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "instrument/peak.h"
#include "cli/commands.h"
#include "train/trainer.h"

namespace loupe::cli {

int cmd_models(const Options&) {
  for (const auto& m : models::all_models()) {
    const auto& r = m.recipe;
    std::string sized = m.vocab > 0 && m.name != "imdb_bilstm"
                            ? " (with " + std::to_string(m.vocab) + " input ids; the data decides)"
                            : "";
    std::printf("%-14s %s\n               %lld parameters%s; recipe: %s lr %g, batch %lld, %d epochs, data: %s\n",
                m.name.c_str(), m.description.c_str(), (long long)m.expected_parameters, sized.c_str(),
                r.optimizer.c_str(), r.lr, (long long)r.batch, r.epochs, r.dataset.c_str());
  }
  return 0;
}

// Host-to-device bandwidth: the same copies the loader makes, from page-locked and from pageable
// memory, timed on the host around `reps` copies and a wait for the last.
int cmd_copybench(const Options& o) {
  Device dev = pick_device(o);
  if (!dev.is_cuda()) throw Error("loupe copybench measures host-to-device copies; it needs --device cuda");
  int64_t batch = o.batch.empty() ? 128 : o.batch[0];
  CudaRuntime* rt = cuda_runtime();
  void* stream = rt->stream_create();
  std::printf("device  %s\n", rt->device_name().c_str());
  for (int64_t bytes : {(batch * 784 + batch) * 4, int64_t(64) << 20}) {
    Tensor dst = empty(Shape{bytes / 4}, DType::f32, dev);
    for (bool pinned : {true, false}) {
      Tensor src = pinned ? empty_pinned(Shape{bytes / 4}, DType::f32) : empty(Shape{bytes / 4}, DType::f32, kCPU);
      fill_(src, 1.0);
      int reps = bytes < (1 << 24) ? 2000 : 50;
      rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);  // warm-up
      void* e = rt->event_record_on(stream);
      rt->event_synchronize(e);
      rt->event_destroy(e);
      double t0 = train::now_seconds();
      for (int r = 0; r < reps; ++r)
        rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);
      e = rt->event_record_on(stream);
      rt->event_synchronize(e);
      rt->event_destroy(e);
      double secs = train::now_seconds() - t0;
      std::printf("%-9s %9.3f MiB x %4d: %6.1f GB/s  (%.1f us per copy)\n", pinned ? "pinned" : "pageable",
                  double(bytes) / (1 << 20), reps, double(bytes) * reps / secs / 1e9, secs / reps * 1e6);
    }
  }
  return 0;
}

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
