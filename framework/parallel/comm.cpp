#include "parallel/comm.h"

namespace loupe::parallel {

namespace {
CommunicatorFactory& factory() {
  static CommunicatorFactory f = nullptr;
  return f;
}
}  // namespace

void register_communicator_factory(CommunicatorFactory f) { factory() = f; }
bool nccl_built() { return factory() != nullptr; }

std::unique_ptr<Communicator> join_world(std::string* why) {
  if (!factory()) {
    *why = "this loupe was built without NCCL (CMake looks for nccl.h and libnccl; it prints loupe: NCCL: ON/OFF)";
    return nullptr;
  }
  return factory()(why);
}

}  // namespace loupe::parallel
