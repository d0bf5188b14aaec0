// A training (or evaluation) step recorded once as a CUDA graph and replayed: one launch instead of
// one per kernel (docs/performance.md, "The step as one CUDA graph"). The step must be graph-safe:
// nothing it passes to a kernel may change from step to step except through device memory that
// device work inside the step updates. loupe's step is written so (the optimizer's count, the loss
// scaler and the accumulated loss live on the device); dropout's draws are the one thing this class
// handles: inside the capture they read a device word that each replay advances.
#pragma once
#include <functional>
#include <string>

#include "core/tensor.h"

namespace loupe::train {

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs fn's host code once while its work on the compute stream is recorded, not run, and
  // instantiates the graph. The default generator's draws inside fn become relative to a device
  // word, and its offset is left where it was: each replay() advances it as fn would. Host state
  // that fn changed otherwise (the optimizer's step count, the FLOP counter) is the caller's to
  // restore. Returns false with `why` (nothing ran on the device) when the work cannot be
  // captured: an op that synchronises, a library call that cannot be captured, or a tensor made
  // in fn that outlives it.
  bool capture(Device d, const std::function<void()>& fn, std::string* why);
  // Runs the recorded work once more, as fn's next eager run would: the generator's offset
  // advances by fn's draws.
  void replay();
  bool ready() const { return exec_ != nullptr; }
  int kernels() const { return kernels_; }
  void reset();  // forgets the graph

 private:
  void* exec_ = nullptr;
  int kernels_ = 0;
  Tensor base_;             // the device word dropout adds to its offsets (8 bytes)
  uint64_t draws_ = 0;      // Philox counters one run of fn takes
  uint64_t base_value_ = 0; // what the device word holds once the queued work has run
  bool base_known_ = false;
};

}  // namespace loupe::train
