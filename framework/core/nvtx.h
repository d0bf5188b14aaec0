// NVTX ranges in the domain "loupe", for Nsight Systems / Nsight Compute. An RAII type; when no
// tool is attached the NVTX calls are no-ops (NVTX3 resolves them to empty functions), so the
// ranges cost a few nanoseconds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loupe {

// The training step now running; ranges carry it as their payload (-1 outside training).
void set_current_step(int64_t step);
int64_t current_step();

// What a range stands for, beyond its name: the trainer's phases (forward, backward, optimizer)
// and the modules' forward calls are what op records (core/op_record.h) are filed under.
enum class RangeKind { Plain, Phase, Module };

// A range around a scope; each distinct name is registered with NVTX once.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name, RangeKind kind = RangeKind::Plain);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  int trace_index_ = -1;  // into the host trace, when recording
  int trace_gen_ = 0;
  RangeKind kind_;
};

// The innermost open range of a kind on the calling thread (nullptr when none); the name lives as
// long as the range.
const char* current_phase_range();
const char* current_module_range();

// Host-side recording of the ranges, for the Chrome trace (--trace): while enabled, every
// NvtxRange on the calling thread is also kept with its begin and end (steady clock, seconds).
struct HostRange {
  std::string name;
  double begin, end;
  int depth;
};
void host_trace_enable(bool on);
std::vector<HostRange> host_trace_take();

// Marks a point (e.g. "checkpoint written").
void nvtx_mark(const char* name);

}  // namespace loupe
