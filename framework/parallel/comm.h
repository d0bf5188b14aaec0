// Collectives between the ranks of a data-parallel run (docs/multi-gpu.md): NCCL's, on the GPU each
// rank owns. The interface is plain C++; the NCCL implementation (comm_nccl.cu) is built where
// CMake finds NCCL (`loupe: NCCL: ON`) and registers itself at load time.
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"

namespace loupe::parallel {

enum class ReduceOp { Sum, Avg };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // In place, on the compute stream, ordered with the work before it (no host wait).
  virtual void all_reduce(const Tensor& t, ReduceOp op) = 0;
  virtual void broadcast(const Tensor& t, int root) = 0;
  // out = the ranks' `in`s concatenated in rank order (out.numel() == world * in.numel()), on the
  // compute stream.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // Overlapping the backward pass (parallel/ddp.h): an all-reduce on the communication stream, after
  // the work issued so far on the compute stream, which does not wait for it...
  virtual void all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  // ...until join(): the compute stream then waits, on the device, for all of them.
  virtual void join() = 0;
  // NCCL's asynchronous error, if any ("" when none): for a watchdog.
  virtual std::string async_error() = 0;
  // A peer whose process ended without saying goodbye ("" when none): the rendezvous's connections,
  // kept as lifelines (parallel/launch.h), for the same watchdog; NCCL alone did not notice a peer
  // lost across hosts. And the goodbye a rank says when it ends normally.
  virtual std::string lost_peer() { return ""; }
  virtual void goodbye() {}
  // Ends the communicator without waiting for peers (ncclCommAbort): a rank that stops while
  // others may still be in a collective (an error, Ctrl-C) must never hang in a clean teardown.
  virtual void abort() = 0;
};

// Joins the world this process's environment describes (parallel/launch.h's rank_env): makes the
// GPU LOCAL_RANK current (call it before any other CUDA work of the process), then rank 0 makes
// NCCL's unique id, the rendezvous hands it to the others, and every rank creates its
// communicator. nullptr with *why set where NCCL is not built in or the world cannot be joined.
std::unique_ptr<Communicator> join_world(std::string* why);

// Whether this build has NCCL (a CPU-only or NCCL-less build says so rather than failing later).
bool nccl_built();

using CommunicatorFactory = std::unique_ptr<Communicator> (*)(std::string* why);
void register_communicator_factory(CommunicatorFactory f);

}  // namespace loupe::parallel
