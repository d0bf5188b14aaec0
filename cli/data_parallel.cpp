#include "cli/data_parallel.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/launch.h"

namespace loupe::cli {

bool is_rank() { return parallel::in_a_world(); }

bool wants_ranks(const Options& o) { return !is_rank() && (o.gpu_count() > 1 || o.nnodes > 1); }

namespace {
// --master ADDR:PORT, else MASTER_ADDR and MASTER_PORT, else (one host) this host and a free port.
void rendezvous_address(const Options& o, parallel::LaunchOptions& lo) {
  std::string m = o.master;
  if (m.empty() && std::getenv("MASTER_ADDR") && std::getenv("MASTER_PORT"))
    m = std::string(std::getenv("MASTER_ADDR")) + ":" + std::getenv("MASTER_PORT");
  if (m.empty()) {
    if (o.nnodes > 1)
      throw Error("--nnodes " + std::to_string(o.nnodes) + " needs --master ADDR:PORT (rank 0's host and a free "
                  "port there), the same on every host");
    return;  // 127.0.0.1 and a free port (run_ranks() picks it)
  }
  const size_t colon = m.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? 0 : std::strtol(m.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end || port < 1 || port > 65535)
    throw Error("--master takes ADDR:PORT (rank 0's host, an IPv4 address or a name, and a port 1..65535), got '" +
                m + "'");
  lo.master_addr = m.substr(0, colon);
  lo.master_port = int(port);
}
}  // namespace

int launch_ranks(const Options& o) {
  if (!parallel::nccl_built())
    throw Error("--gpus " + std::to_string(o.gpu_count()) + ": this loupe was built without NCCL (CMake looks for nccl.h "
                "and libnccl and prints loupe: NCCL: ON/OFF); one GPU needs no --gpus");
  if (o.device == "cpu") throw Error("--gpus trains on GPUs; --device cpu runs one process");
  const int have = cuda_runtime() ? cuda_runtime()->device_count() : 0;
  if (have < o.gpu_count())
    throw Error("--gpus " + std::to_string(o.gpu_count()) + ": this host shows " + std::to_string(have) +
                " GPU(s) (nvidia-smi; CUDA_VISIBLE_DEVICES)");
  parallel::LaunchOptions lo;
  lo.exe = "/proc/self/exe";
  lo.args = o.args;
  lo.procs = o.gpu_count();
  lo.nnodes = o.nnodes;
  lo.node_rank = o.node_rank;
  rendezvous_address(o, lo);
  std::printf("launch  %d rank(s) on GPUs 0..%d of this host (host %d of %d, world %d)\n", o.gpu_count(), o.gpu_count() - 1,
              o.node_rank, o.nnodes, o.gpu_count() * o.nnodes);
  std::fflush(stdout);
  return parallel::run_ranks(lo);
}

}  // namespace loupe::cli
