// Flush-to-zero (FTZ) and denormals-are-zero (DAZ) for the CPU's float work. A float below 2^-126
// (a denormal) takes the slow path of the SSE/AVX units, about 100 cycles an operation: mnist_mlp's
// weights and gradients drift into that range as it trains, and its CPU epochs slowed from 40,000
// to 19,000 samples/s over 12 epochs on the 2-core machine (lab/benchmarks.md). Flushing them
// to zero is what cuDNN, cuBLAS and oneDNN's defaults and the GPU's own float32 do.
//
// The setting is process-wide; the x86 control register (MXCSR) that holds it is per thread, so
// every thread that runs loupe's work takes it from here: the caller of set_flush_denormals at
// once, the CPU pool's threads (loupe's or OpenMP's, so oneDNN's kernels too) before the next
// chunk they run, the loader's workers as they start. Off by default in the library (float64
// gradient checks stay exact); the `loupe` command turns it on. Elsewhere than x86 a no-op.
#pragma once

namespace loupe {

void set_flush_denormals(bool on);
bool flush_denormals();  // the setting
// Brings the calling thread's control register to the setting (cheap when it is already there).
void apply_denormal_mode();
// Whether the calling thread flushes now (both FTZ and DAZ set): for tests and reports.
bool thread_flushes_denormals();

// Sets the mode for a scope and restores the previous one after (the gradient checks: float64
// central differences must see every tiny value).
class DenormalScope {
 public:
  explicit DenormalScope(bool flush) : before_(flush_denormals()) { set_flush_denormals(flush); }
  ~DenormalScope() { set_flush_denormals(before_); }
  DenormalScope(const DenormalScope&) = delete;
  DenormalScope& operator=(const DenormalScope&) = delete;

 private:
  bool before_;
};

}  // namespace loupe
