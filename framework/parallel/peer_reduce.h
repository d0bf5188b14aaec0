// The gradient all-reduce by the GPUs' copy engines, for ranks whose GPUs share one host and reach
// each other directly (P2P over NVLink or PCIe): each rank copies its bucket into a buffer on every
// peer (cudaMemcpyAsync, a copy engine: no SM), says so with a flag in the peer's memory, waits
// for its peers' copies, and one small kernel averages the ranks' values in rank order (so every
// rank computes the same bits). NCCL's kernels did the same with 24 SMs held beside the backward
// pass (lab/benchmarks.md, "imdb_bilstm on two GPUs"). Buffers are exchanged once, by CUDA IPC
// handles over the communicator; the flags are counters, so a captured step replays correctly.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "parallel/comm.h"

namespace loupe::parallel {

class PeerReduce {
 public:
  virtual ~PeerReduce() = default;
  // Averages grads[offset, offset + numel) over the ranks in place, on its own stream after the
  // work issued so far on the compute stream, which does not wait for it until join(). `slot` is
  // the bucket's index (below the `slots` it was made for); every rank issues the same slots in
  // the same order.
  virtual void reduce_async(int64_t offset, int64_t numel, int slot) = 0;
  virtual void join() = 0;
  // "copy engines (2 GPUs of one host, P2P)"
  virtual std::string describe() const = 0;
};

// Collective: every rank of `comm` calls it with its own gradient arena (float32, the same size on
// every rank). nullptr, with *why, where some rank cannot take part (another host, no P2P, a
// build without CUDA); every rank then gets nullptr.
std::unique_ptr<PeerReduce> make_peer_reduce(const Tensor& grads, int slots, Communicator& comm, std::string* why);

using PeerReduceFactory = std::unique_ptr<PeerReduce> (*)(const Tensor&, int, Communicator&, std::string*);
void register_peer_reduce_factory(PeerReduceFactory f);

}  // namespace loupe::parallel
