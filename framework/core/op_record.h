// Op records for `loupe profile`: while recording is on (on the calling thread, only inside the
// profile's window), every op opens an OpScope that keeps its name, the module and phase it ran
// in, its FLOPs (every add_flops inside the scope) and the bytes it moved, and, on a GPU, tags
// every kernel launched inside it with a CUPTI external correlation id (through a hook the CUDA
// activity tracker installs), so kernels join the op that launched them. Off, a scope is one
// thread-local test. Scopes nest; only the outermost one records (linear's matmul and bias add
// are linear's), so the records partition the step's FLOPs and kernels.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loupe {

struct OpRecord {
  std::string op;      // "linear", "conv2d", "Adam"; backward: the forward op that recorded the node
  std::string module;  // "fc1/Linear" (the innermost module range), "" outside any module
  std::string phase;   // "forward", "backward", "optimizer" (the trainer's phase range), else "other"
  double flops = 0;    // analytic, as core/flops.h counts them
  double bytes = 0;    // analytic: each input read once, each output written once (some ops say otherwise)
  double host_begin = 0, host_end = 0;  // steady clock, seconds (the host time inside the scope)
  uint64_t id = 0;     // the CUPTI external correlation id of its kernels (unique, > 0)
  int64_t step = -1;   // the training step (core/nvtx.h's current_step)
};

// Recording on the calling thread. take() hands the records over (and the FLOPs counted outside
// any scope since enable(true)) and clears them.
void op_records_enable(bool on);
bool op_records_on();
std::vector<OpRecord> op_records_take(double* unscoped_flops = nullptr);
// The id of the calling thread's open outermost scope; 0 when none is open or recording is off
// (a CUDA graph's nodes are tied to the op that captured them by it: instrument/graph_nodes.h).
uint64_t op_record_current_id();

// The GPU side: called with (id, true) when an outermost scope opens and (id, false) when it
// closes, on the recording thread; the CUDA activity tracker pushes and pops CUPTI's external
// correlation id. nullptr removes it.
using OpCorrelationHook = void (*)(uint64_t id, bool open);
void set_op_correlation_hook(OpCorrelationHook h);

class OpScope {
 public:
  // An op's entry: its name (a literal) and the tensors it reads.
  explicit OpScope(const char* op, std::initializer_list<const Tensor*> inputs = {});
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // Adds what the op wrote; returns it, for `return scope.result(y);`.
  const Tensor& result(const Tensor& y);
  void add_bytes(double b);
  void add_bytes(const Tensor& t);  // t's bytes (none when undefined)
  // Replaces the convention where the op moves a known amount (an embedding reads only its rows).
  void set_bytes(double b);

  // The backward pass: the engine opens one around each node, named by the site it was recorded
  // at (below) and reading what the forward op read.
  struct Backward {};
  OpScope(Backward, int site, double forward_input_bytes, const char* node_name);

 private:
  bool enter();  // counts the scope; true when it is the outermost one, which records
  void open(std::string op, std::string module, const char* phase);
  int index_ = -1;  // into this thread's records when this scope is the outermost
  bool nested_ = false;
};

// Where a node was recorded: the module and op of the scope open then (the node's own name
// outside any op), interned, and the bytes that op read; site -1 when not recording.
// autograd::record stamps each node with it.
struct OpSite {
  int site = -1;
  double input_bytes = 0;  // < 0: no op scope was open (a view), whose backward moves nothing
};
OpSite op_site_here(const char* node_name);

namespace detail {
void op_record_flops(double f);  // add_flops' share of the open scope
}

}  // namespace loupe
