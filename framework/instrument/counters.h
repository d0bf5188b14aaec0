// Hardware counters per kernel (`loupe profile --counters`): CUPTI's range profiler in automatic
// ranges with kernel replay, so each kernel launched between begin() and end() is one range,
// replayed as often as its metrics need passes (so the pass must not be timed), and evaluated to
// the metrics below, named as Nsight Compute names them. The interface is plain C++; the CUDA
// implementation (counters_cuda.cu) registers itself when loupe is built with CUDA.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace loupe::instrument {

// What the profile reads, in this order: the FP32 FMA pipe, the tensor pipe (the chip's name of
// it), DRAM throughput, each in percent of its peak, and the kernel's duration (ns).
struct CounterNames {
  std::string fma = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active";
  std::string tensor;  // chosen by the chip: see counters_cuda.cu
  std::string dram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
  std::string duration = "gpu__time_duration.sum";
};

struct KernelCounters {
  std::string name;  // the range's name: the kernel's, as CUPTI gives it
  double fma_pct = -1, tensor_pct = -1, dram_pct = -1, duration_ns = -1;  // < 0: not read
};

class CounterSession {
 public:
  virtual ~CounterSession() = default;
  virtual const CounterNames& names() const = 0;
  virtual void begin() = 0;  // the kernels launched from here (after the device's earlier work) ...
  virtual void end() = 0;    // ... to here (after they finished) are ranges; throws loupe::Error
  virtual std::vector<KernelCounters> read() = 0;  // one per kernel, in launch order
};

// nullptr with *why set: not built with CUDA, no GPU, or profiling not permitted here.
std::unique_ptr<CounterSession> make_counter_session(std::string* why);

using CounterSessionFactory = std::unique_ptr<CounterSession> (*)(std::string* why);
void register_counter_session_factory(CounterSessionFactory f);

}  // namespace loupe::instrument
