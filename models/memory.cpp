#include "models/memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace loupe::models {

int optimizer_state_tensors(const std::string& optimizer) {
  if (optimizer == "rmsprop" || optimizer == "sgd") return 1;
  return 2;  // adam, adadelta; an unknown name is refused later (make_optimizer) and counts the most
}

namespace {
std::string optimizer_title(const std::string& name) {
  if (name == "adam") return "Adam";
  if (name == "rmsprop") return "RMSprop";
  if (name == "adadelta") return "Adadelta";
  if (name == "sgd") return "SGD";
  return name;
}

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelInfo& info, int64_t batch, Precision precision, const std::string& optimizer) {
  MemoryEstimate e;
  e.batch = batch;
  e.optimizer = optimizer_title(optimizer);
  double params = 0, values = 0;
  for (const LayerCost& c : info.costs) {
    params += double(c.parameters);
    values += double(c.activations);
    if (c.parameters > e.largest_parameters) e.largest_parameters = c.parameters, e.largest_layer = c.layer;
    if (c.activations > e.widest_activations) e.widest_activations = c.activations, e.widest_layer = c.layer;
  }
  // Parameters, gradients and the optimizer's state are float32 whatever the precision (the master
  // weights: core/precision.h); fp16/bf16 add the arena's 16-bit compute copy and halve activations.
  const double act_bytes = double(dtype_size(compute_dtype(precision)));
  e.parameters = params * (4 + (is_16bit(precision) ? act_bytes : 0));
  e.gradients = params * 4;
  e.optimizer_state = params * 4 * optimizer_state_tensors(optimizer);
  e.activations_per_sample = values * act_bytes * kActivationFactor;
  e.activations = e.activations_per_sample * double(batch);
  return e;
}

double device_memory_free(Device d) {
  if (!d.is_cuda() || !cuda_available()) return -1;
  const size_t b = cuda_runtime()->free_bytes();
  return b > 0 ? double(b) : -1;
}

std::string memory_refusal(const ModelInfo& info, const MemoryEstimate& e, double available, const std::string& where) {
  if (available < 0 || e.total() <= available) return "";
  const std::string why = info.name + ": the model needs about " + bytes_text(e.total()) + " at --batch " +
                          std::to_string(e.batch) + " (parameters " + bytes_text(e.parameters) + ", gradients " +
                          bytes_text(e.gradients) + ", " + e.optimizer + "'s state " + bytes_text(e.optimizer_state) +
                          ", activations " + bytes_text(e.activations) + "; ";
  const std::string more = "), more than the " + bytes_text(available) + " " + where + ": ";
  const std::string widest = "the largest layer '" + e.widest_layer + "' outputs " + grouped(e.widest_activations) +
                             " values per sample";
  // Only the activations are past it: a batch that fits is named, with a tenth of the memory to
  // spare (the estimate is no closer than that to a step's peak) and cut to two significant
  // digits, a number a user would type.
  const double room = 0.9 * available - e.fixed();
  int64_t fits = room > 0 && e.activations_per_sample > 0 ? int64_t(std::floor(room / e.activations_per_sample)) : 0;
  int64_t unit = 1;
  while (fits / unit >= 100) unit *= 10;
  fits = fits / unit * unit;
  if (fits >= 1) return why + widest + more + "a smaller --batch helps: --batch " + std::to_string(fits) + " would fit";
  const std::string what = e.activations > e.fixed() ? widest
                                                       : "the largest layer '" + e.largest_layer + "' has " +
                                                             grouped(e.largest_parameters) + " parameters";
  return why + what + more + "a smaller layer (even --batch 1 would not fit)";
}

void check_memory(const ModelInfo& info, int64_t batch, Precision precision, Device device) {
  if (info.costs.empty()) return;
  const MemoryEstimate e = estimate_memory(info, batch, precision, info.recipe.optimizer);
  const double host = host_memory_free();
  if (!device.is_cuda()) {
    // The build's own float32 copy, alive while the arena's values and gradients are made
    // (nn::Module::to), is gone before the optimizer's state (at least one tensor) is allocated.
    if (std::string why = memory_refusal(info, e, host, "this machine has free"); !why.empty()) throw Error(why);
    return;
  }
  if (std::string why = memory_refusal(info, e, device_memory_free(device), device.str() + " has free"); !why.empty())
    throw Error(why);
  // The layers are built on the host in float32 before they move to the GPU (nn::Module::to).
  if (host >= 0 && e.gradients > host)
    throw Error(info.name + ": building the model takes about " + bytes_text(e.gradients) +
                " of host memory for its float32 weights before they move to " + device.str() + " (the largest layer '" +
                e.largest_layer + "' has " + grouped(e.largest_parameters) + " parameters), more than the " +
                bytes_text(host) + " this machine has free: a smaller layer");
}

}  // namespace loupe::models
