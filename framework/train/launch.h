// Data parallelism's processes (docs/plans/data_parallel.md, step 1): the launcher that starts one
// process per GPU with torchrun's environment, and the rendezvous through which rank 0 hands the
// other ranks NCCL's unique id (nothing else crosses it). Both are plain POSIX; the launcher never
// lets a run hang on a dead rank: the first rank to fail stops the others.
#pragma once
#include <string>
#include <vector>

namespace loupe::train {

struct LaunchOptions {
  std::string exe;                 // the program each rank runs (loupe itself: /proc/self/exe)
  std::vector<std::string> args;   // its arguments, without argv[0]
  int procs = 1;                   // ranks on this host (one per GPU)
  int nnodes = 1, node_rank = 0;   // hosts, and this one's place among them
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0: a free port on this host (single-host runs)
  double grace_seconds = 2;        // after a rank fails: SIGTERM to the others, SIGKILL after this
};

// Starts the ranks (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// NCCL_NVLS_ENABLE=0 in each one's environment, each in a process group of its own), forwards
// SIGINT and SIGTERM to them, and waits. Returns 0 when every rank exits 0; otherwise the first
// failing rank's status (128 + signal when it was killed), after stopping the others and printing
// one line on stderr naming that rank.
int launch(const LaunchOptions& o);

// A free TCP port on 127.0.0.1 (bound and released: a later bind may race, the rendezvous says so).
int free_port();

struct RendezvousOptions {
  std::string addr = "127.0.0.1";
  int port = 0;
  int rank = 0, world = 1;
  double timeout_seconds = 60;
};

// The rendezvous's connections, kept open for the whole run: rank 0 holds one to every other rank,
// each other rank one to rank 0. A process that ends has its sockets closed by the kernel, even
// when killed, so a peer that vanished is seen at the next poll, across hosts too, where NCCL's
// socket transport went on without noticing (check_ddp: a lost peer). A rank that ends normally
// says goodbye first, so its closing is not taken for a death.
class Lifelines {
 public:
  Lifelines() = default;
  ~Lifelines();
  Lifelines(const Lifelines&) = delete;
  Lifelines& operator=(const Lifelines&) = delete;
  void add(int rank, int fd);  // takes the socket
  // "" while every peer is there or has said goodbye; else which one's connection closed, in words.
  std::string lost();
  // Tells every peer that this rank ends normally, and lets go of the connections.
  void goodbye();
  size_t size() const { return peers_.size(); }

 private:
  struct Peer {
    int rank, fd;
  };
  std::vector<Peer> peers_;
};

// Rank 0 listens on addr:port and sends `blob` to each of the world - 1 other ranks, which connect
// (retrying until the timeout) and say their rank; every rank returns the blob. A duplicate or
// out-of-range rank, a peer that never comes, or a wrong reply is a loupe::Error naming it. With
// `keep`, the connections stay open in it as the world's lifelines.
std::string rendezvous(const RendezvousOptions& o, const std::string& blob = "", Lifelines* keep = nullptr);

// The torchrun variables of this process when it is a rank (WORLD_SIZE set), else world 1.
struct RankEnv {
  int rank = 0, local_rank = 0, world = 1;
  std::string master_addr;
  int master_port = 0;
};
RankEnv rank_env();

}  // namespace loupe::train
