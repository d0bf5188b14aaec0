// Data parallelism's gradient all-reduce (docs/multi-gpu.md): the gradient arena cut into buckets
// (parallel/ddp_plan.h), each all-reduced (averaged) in place on the communication stream as soon
// as backward has finished its last gradient, so communication overlaps the rest of the backward
// pass as in PyTorch's DDP. Buckets go strictly in plan order (NCCL needs every rank to issue its
// collectives in one order); a bucket that is ready before the one before it waits for it. Nothing
// here waits on the host, and a step with a reducer can be captured in a CUDA graph like any other
// (the side stream joins the capture by its events).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "nn/arena.h"
#include "parallel/comm.h"
#include "parallel/ddp_plan.h"
#include "parallel/peer_reduce.h"

namespace loupe::parallel {

// Who averages the buckets: NCCL's collectives, or the copy engines between GPUs of one host
// (parallel/peer_reduce.h; no faster on two H200s for imdb_bilstm, slower for cifar10_cnn:
// lab/benchmarks.md, so not the default).
enum class Transport { Nccl, CopyEngines };

struct ReducerOptions {
  int64_t bucket_cap_bytes = 25 << 20;  // PyTorch DDP's default bucket_cap_mb = 25
  int64_t first_bucket_bytes = 1 << 20;  // and its small first bucket, to start early
  Transport transport = Transport::Nccl;
  // What the gradients cross the links in (LOUPE_DDP_GRAD_DTYPE): float32, or bfloat16 / float16
  // (half the bytes; each average rounded to 16 bits once more). NCCL only.
  DType wire = DType::f32;
};

// Reads LOUPE_DDP_BUCKET_MB, LOUPE_DDP_ALLREDUCE and LOUPE_DDP_GRAD_DTYPE (core/knobs.cpp) over the
// defaults.
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
  // "3 buckets (1.0, 25.0, 12.3 MiB) by copy engines (2 GPUs of one host, P2P)", for the run's header.
  std::string describe() const;
  // "NCCL" or "copy engines": whose time the report's all-reduce share is.
  std::string transport() const { return peer_ ? "copy engines" : "NCCL"; }

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
  Tensor wire_;  // the 16-bit copy of the gradient arena the buckets cross in (ReducerOptions::wire)
  bool open_ = false;
  autograd::GradReadyHook* prev_ = nullptr;
  std::vector<ParamSlot> slots_;
  ReducerOptions options_;
  std::vector<int> seen_;       // the first pass: parameters in the order their gradients came
  std::vector<size_t> pauses_;  // and the lengths of seen_ at which backward paused
  bool planned_ = false;        // replan() has run
  bool split_ = true;           // LOUPE_DDP_SPLIT_BACKWARD: two rounds and the buckets cut again
  std::unique_ptr<PeerReduce> peer_;  // the copy engines, where they carry the buckets
};

}  // namespace loupe::parallel
