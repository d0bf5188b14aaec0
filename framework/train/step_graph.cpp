#include "train/step_graph.h"

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/random.h"

namespace loupe::train {

StepGraph::~StepGraph() { reset(); }

void StepGraph::reset() {
  if (exec_) cuda_runtime()->graph_destroy(exec_);
  exec_ = nullptr;
  kernels_ = 0;
}

bool StepGraph::capture(Device d, const std::function<void()>& fn, std::string* why) {
  reset();
  LOUPE_CHECK(d.is_cuda(), "CUDA graphs are a GPU feature: a step on ", d.str(), " cannot be captured");
  CudaRuntime* rt = cuda_runtime();
  if (!base_.defined()) base_ = zeros(Shape{1}, DType::f64, d);  // 8 bytes: a uint64_t word
  auto* word = static_cast<uint64_t*>(base_.data_ptr());
  Generator& gen = default_generator();
  const uint64_t start = gen.offset;
  std::string failed;
  rt->capture_begin();
  gen.graph_base = word;
  gen.capture_start = start;
  try {
    fn();
    draws_ = gen.offset - start;
    if (draws_) rt->u64_add(word, draws_);  // the graph's last node: the next replay draws afresh
  } catch (const std::exception& e) {
    failed = e.what();
  }
  GraphCapture g = rt->capture_end();
  gen.graph_base = nullptr;
  gen.offset = start;  // nothing ran: the replays advance it
  if (failed.empty() && !g.exec) failed = g.error;
  if (failed.empty() && g.alloc_nodes != g.free_nodes) {
    failed = std::to_string(g.alloc_nodes) + " allocations made and " + std::to_string(g.free_nodes) +
             " freed inside the step: a tensor outlives it or one made before it was freed in it";
  }
  if (!failed.empty()) {
    if (g.exec) rt->graph_destroy(g.exec);
    if (why) *why = failed;
    return false;
  }
  exec_ = g.exec;
  kernels_ = g.kernels;
  return true;
}

void StepGraph::replay() {
  LOUPE_CHECK(exec_, "StepGraph::replay without a captured graph");
  Generator& gen = default_generator();
  if (draws_ && (!base_known_ || base_value_ != gen.offset)) {
    // Eager draws since the last replay (a partial batch, evaluation): bring the word up first.
    cuda_runtime()->u64_set(base_.data_ptr(), gen.offset);
  }
  cuda_runtime()->graph_launch(exec_);
  gen.offset += draws_;
  base_value_ = gen.offset;
  base_known_ = true;
}

}  // namespace loupe::train
