// Data parallelism's gradient all-reduce (docs/multi-gpu.md): the gradient arena cut into buckets
// (parallel/ddp_plan.h), each all-reduced (averaged) in place on the communication stream as soon
// as backward has finished its last gradient, so communication overlaps the rest of the backward
// pass as in PyTorch's DDP. Buckets go strictly in plan order (NCCL needs every rank to issue its
// collectives in one order); a bucket that is ready before the one before it waits for it. Nothing
// here waits on the host, and a step with a reducer can be captured in a CUDA graph like any other
// (the side stream joins the capture by its events).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "nn/arena.h"
#include "parallel/comm.h"
#include "parallel/ddp_plan.h"

namespace loupe::parallel {

struct ReducerOptions {
  int64_t bucket_cap_bytes = 25 << 20;  // PyTorch DDP's default bucket_cap_mb = 25
  int64_t first_bucket_bytes = 1 << 20;  // and its small first bucket, to start early
  // The SMs left to NCCL's kernels beside backward: the LSTM's second-round weight GEMMs are
  // planned for the rest (CudaRuntime::set_comm_sms). Unset: the runtime's default, 24.
  std::optional<int> sm_carveout;
};

// Reads LOUPE_DDP_BUCKET_MB and LOUPE_DDP_SM_CARVEOUT (core/knobs.cpp) over the defaults.
ReducerOptions reducer_options_from_knobs();

class GradReducer final : public autograd::GradReadyHook {
 public:
  // The gradients of `arena`'s parameters (float32, in its gradient arena), averaged over `comm`.
  GradReducer(const nn::ParameterArena& arena, Communicator& comm, ReducerOptions o = {});
  ~GradReducer() override;
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Around one backward pass on this thread: begin() listens for finished gradients; end() sends
  // the buckets not yet sent (parameters that got no gradient count as finished then: their
  // zeroed gradients are averaged like any other), and makes the compute stream wait for every
  // bucket, so what follows (the loss scaler's check, the optimizer) reads averaged gradients.
  void begin();
  void end();

  void ready(const Tensor& grad) override;
  void pause() override;
  bool wants_rounds() const override { return split_; }

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Bytes all-reduced per step (the buckets' slices, alignment padding included).
  int64_t bytes_per_step() const { return bytes_; }
  // "3 buckets (1.0, 25.0, 12.3 MiB) by NCCL", for the run's header.
  std::string describe() const;

 private:
  void send_ready();  // every bucket whose turn has come and whose gradients are all in
  // After the first backward pass: the buckets planned again for the order its gradients finished
  // in and the pauses it took (ddp_plan.h), as PyTorch's DDP rebuilds its buckets after its first
  // iteration. Rank 0's order is broadcast so that every rank issues the same collectives.
  void replan();
  void adopt(std::vector<Bucket> buckets);
  const nn::ParameterArena& arena_;
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<std::string> range_names_;           // NVTX, one per bucket
  std::unordered_map<const void*, int> slot_of_;   // a gradient's address -> its parameter
  std::vector<int> bucket_of_;                     // parameter -> bucket
  std::vector<int> waiting_;                       // per bucket: gradients not yet in
  std::vector<char> in_;                           // per parameter: in this pass
  size_t next_ = 0;                                // the next bucket to send
  int64_t bytes_ = 0;
  bool open_ = false;
  autograd::GradReadyHook* prev_ = nullptr;
  std::vector<ParamSlot> slots_;
  ReducerOptions options_;
  std::vector<int> seen_;       // the first pass: parameters in the order their gradients came
  std::vector<size_t> pauses_;  // and the lengths of seen_ at which backward paused
  bool planned_ = false;        // replan() has run
  bool split_ = true;           // LOUPE_DDP_SPLIT_BACKWARD: two rounds and the buckets cut again
};

}  // namespace loupe::parallel
