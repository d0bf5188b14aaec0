#include "cli/data_parallel.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "instrument/advice.h"
#include "instrument/report_io.h"
#include "run/interrupt.h"
#include "parallel/launch.h"

namespace loupe::cli {

bool is_rank() { return parallel::in_a_world(); }

bool wants_ranks(const Options& o) { return !is_rank() && (o.gpus > 1 || o.nnodes > 1); }

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
    return;  // 127.0.0.1 and a free port (launch() picks it)
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
    throw Error("--gpus " + std::to_string(o.gpus) + ": this loupe was built without NCCL (CMake looks for nccl.h "
                "and libnccl and prints loupe: NCCL: ON/OFF); one GPU needs no --gpus");
  if (o.device == "cpu") throw Error("--gpus trains on GPUs; --device cpu runs one process");
  const int have = cuda_runtime() ? cuda_runtime()->device_count() : 0;
  if (have < o.gpus)
    throw Error("--gpus " + std::to_string(o.gpus) + ": this host shows " + std::to_string(have) +
                " GPU(s) (nvidia-smi; CUDA_VISIBLE_DEVICES)");
  parallel::LaunchOptions lo;
  lo.exe = "/proc/self/exe";
  lo.args = o.args;
  lo.procs = o.gpus;
  lo.nnodes = o.nnodes;
  lo.node_rank = o.node_rank;
  rendezvous_address(o, lo);
  std::printf("launch  %d rank(s) on GPUs 0..%d of this host (host %d of %d, world %d)\n", o.gpus, o.gpus - 1,
              o.node_rank, o.nnodes, o.gpus * o.nnodes);
  std::fflush(stdout);
  return parallel::launch(lo);
}

namespace {
// ncclCommAbort, waited for at most `seconds`: over sockets, with the peer gone, it did not return
// (two H200s, check_ddp's lost peer: the rank said it was ending and trained on). The process ends
// soon after either way, and its end frees what the abort would have.
bool abort_within(parallel::Communicator& comm, double seconds) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([&comm, done] {
    comm.abort();
    done->store(true);
  }).detach();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done->load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done->load();
}
}  // namespace

}  // namespace loupe::cli
