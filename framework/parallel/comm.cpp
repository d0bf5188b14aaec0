#include "parallel/comm.h"
#include "parallel/peer_reduce.h"

#include "core/error.h"

namespace loupe::parallel {

namespace {
CommunicatorFactory& factory() {
  static CommunicatorFactory f = nullptr;
  return f;
}
PeerReduceFactory& peer_factory() {
  static PeerReduceFactory f = nullptr;
  return f;
}
}  // namespace

void Communicator::all_reduce_async_16(const Tensor&, const Tensor&, ReduceOp) {
  LOUPE_FAIL("this communicator cannot carry an all-reduce in 16 bits (LOUPE_DDP_GRAD_DTYPE)");
}

void register_communicator_factory(CommunicatorFactory f) { factory() = f; }
bool nccl_built() { return factory() != nullptr; }

std::unique_ptr<Communicator> join_world(std::string* why) {
  if (!factory()) {
    *why = "this loupe was built without NCCL (CMake looks for nccl.h and libnccl; it prints loupe: NCCL: ON/OFF)";
    return nullptr;
  }
  return factory()(why);
}

void register_peer_reduce_factory(PeerReduceFactory f) { peer_factory() = f; }

std::unique_ptr<PeerReduce> make_peer_reduce(const Tensor& grads, int slots, Communicator& comm, std::string* why) {
  if (!peer_factory()) {
    *why = "this loupe was built without CUDA";
    return nullptr;
  }
  return peer_factory()(grads, slots, comm, why);
}

}  // namespace loupe::parallel
