// loupe copybench: host-to-device bandwidth as the loader copies (instrument/peak.h).
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "instrument/peak.h"
#include "cli/commands.h"

namespace loupe::cli {

int cmd_copybench(const Options& o) {
  Device dev = pick_device(o);
  if (!dev.is_cuda()) throw Error("loupe copybench measures host-to-device copies; it needs --device cuda");
  std::printf("device  %s\n", cuda_runtime()->device_name().c_str());
  for (const instrument::CopyRate& r : instrument::measure_host_to_device(dev, o.batch.empty() ? 128 : o.batch[0]))
    std::printf("%-9s %9.3f MiB x %4d: %6.1f GB/s  (%.1f us per copy)\n", r.pinned ? "pinned" : "pageable",
                double(r.bytes) / (1 << 20), r.reps, double(r.bytes) * r.reps / r.seconds / 1e9, r.seconds / r.reps * 1e6);
  return 0;
}

}  // namespace loupe::cli
