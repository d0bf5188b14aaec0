// A model's memory estimated from its ModelInfo::costs before anything is built, and checked
// against what the machine can still give (docs/reliability.md, "Memory checked first"): a layer
// too large for the machine is refused with its name and the batch, not met by the allocator.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/precision.h"
#include "models/registry.h"

namespace loupe::models {

// Bytes, each part of a training run's memory at one batch.
struct MemoryEstimate {
  int64_t batch = 0;
  double parameters = 0;   // float32 master weights, plus the 16-bit compute copy in fp16/bf16
  double gradients = 0;    // float32, one per parameter (the arena's)
  double optimizer_state = 0;
  double activations = 0;  // at `batch`: kActivationFactor x the layers' outputs
  double activations_per_sample = 0;
  std::string optimizer;   // as the message names it: "Adam", "RMSprop", "Adadelta", "SGD"
  // The layer with the most parameters, and the one with the largest output ("" with no costs).
  std::string largest_layer, widest_layer;
  int64_t largest_parameters = 0, widest_activations = 0;
  double fixed() const { return parameters + gradients + optimizer_state; }  // the batch does not change these
  double total() const { return fixed() + activations; }
};

// Values kept per output value of a layer while a step runs: the output itself, kept for the
// backward pass, and the pre-activation or the mask its backward needs beside it (an unfused bias
// add, the activation's input, dropout's mask), each with the gradient flowing back through it
// (docs/reliability.md, "Memory checked first", has the measurement behind it).
constexpr double kActivationFactor = 4;

// Float32 tensors the optimizer keeps per parameter (optim/optimizer.cpp): Adam 2 (exp_avg,
// exp_avg_sq), Adadelta 2 (square_avg, acc_delta), RMSprop 1 (square_avg), SGD 1 (its momentum
// buffer is allocated with momentum 0 too). An unknown name: 2, the most any keeps.
int optimizer_state_tensors(const std::string& optimizer);

MemoryEstimate estimate_memory(const ModelInfo& info, int64_t batch, Precision precision, const std::string& optimizer);

// The host's free memory: core/host_memory.h.
// The GPU's free memory (what the driver reports free plus what loupe's pool holds unused);
// negative where it cannot be read (a CPU build, no GPU).
double device_memory_free(Device d);

// "" when the estimate fits in `available` bytes (or nothing is known); else the sentence that
// refuses the model: its parts, its largest layer, the batch, and what to change. `where` ends
// the comparison: "this machine has free", "cuda:0 has free".
std::string memory_refusal(const ModelInfo& info, const MemoryEstimate& e, double available, const std::string& where);

// Throws the refusal as an Error when the model at `batch` does not fit where it will run: on the
// CPU the whole estimate against the host; on a GPU the whole estimate against the device and the
// float32 weights (built on the host first) against the host. A model without costs passes.
void check_memory(const ModelInfo& info, int64_t batch, Precision precision, Device device);

}  // namespace loupe::models
