#include "models/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/cuda_runtime.h"
#include "core/error.h"

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

// A value of a file as the first number in it: -1 when it is missing or "max" (no limit).
double read_number(const std::string& path, const std::string& key = "") {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    // "inactive_file 4096" in memory.stat, "VmSize:\t  1024 kB" in /proc/self/status
    if (!key.empty() && (line.rfind(key, 0) != 0 || line.size() <= key.size() || !std::isspace((unsigned char)line[key.size()])))
      continue;
    const std::string value = line.substr(key.size());
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    return end == value.c_str() ? -1 : v;
  }
  return -1;
}

// A limit less a usage less its reclaimable page cache; -1 when there is no limit.
double headroom(double limit, double usage, double inactive_file) {
  if (limit < 0 || usage < 0) return -1;
  return std::max(0.0, limit - std::max(0.0, usage - std::max(0.0, inactive_file)));
}

double least(double a, double b) { return a < 0 ? b : b < 0 ? a : std::min(a, b); }

// "3.1 GB", "512 MB": decimal units, as the message reads.
std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.0f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f kB", b / 1e3);
  return buf;
}

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

double address_space_free() {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
  const double mapped = read_number("/proc/self/status", "VmSize:") * 1024;  // kB
  return mapped < 0 ? -1 : std::max(0.0, double(rl.rlim_cur) - mapped);
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

double cgroup_memory_free(const std::string& proc_cgroup, const std::string& cgroup_root) {
  // As cores_within_cgroups (core/thread_pool.h): the cgroup and each above it may hold a limit.
  double free = -1;
  std::ifstream groups(proc_cgroup);
  for (std::string line; std::getline(groups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const bool v2 = line.rfind("0::", 0) == 0, v1 = controllers.find(",memory,") != std::string::npos;
    if (!v2 && !v1) continue;
    for (std::string path = line.substr(b + 1);; path = path.substr(0, path.rfind('/'))) {
      const std::string dir = (v2 ? cgroup_root : cgroup_root + "/memory") + path + "/";
      if (v2)
        free = least(free, headroom(read_number(dir + "memory.max"), read_number(dir + "memory.current"),
                                    read_number(dir + "memory.stat", "inactive_file")));
      else  // v1 writes "no limit" as a number near 2^63, larger than any machine: no special case
        free = least(free, headroom(read_number(dir + "memory.limit_in_bytes"), read_number(dir + "memory.usage_in_bytes"),
                                    read_number(dir + "memory.stat", "total_inactive_file")));
      if (path.empty() || path == "/") break;
    }
  }
  return free;
}

double host_memory_free() {
  const double kb = read_number("/proc/meminfo", "MemAvailable:");
  double free = kb < 0 ? -1 : kb * 1024;
  free = least(free, cgroup_memory_free("/proc/self/cgroup", "/sys/fs/cgroup"));
  return least(free, address_space_free());  // tests and `ulimit -v` set RLIMIT_AS
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
  // Only the activations are past it: the largest batch that fits is named.
  const int64_t fits = e.fixed() < available && e.activations_per_sample > 0
                           ? int64_t(std::floor((available - e.fixed()) / e.activations_per_sample))
                           : 0;
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
