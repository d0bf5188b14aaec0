// Data parallelism's processes (docs/multi-gpu.md): the launcher that starts one process per GPU
// with torchrun's environment, and the rendezvous through which rank 0 hands the other ranks NCCL's
// unique id (nothing else crosses it). Both are plain POSIX; the launcher never lets a run hang on
// a dead rank: the first rank to fail stops the others.
#pragma once
#include <string>
#include <vector>

namespace loupe::parallel {

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
int run_ranks(const LaunchOptions& o);

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

// The world this process is a rank of, from the launcher that started it:
// - loupe's launcher or torchrun: WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
// - Slurm's srun (no WORLD_SIZE, SLURM_STEP_NUM_TASKS > 1: the step's tasks, so `loupe train` run
//   directly in a batch script is not mistaken for rank 0 of the job's tasks): SLURM_PROCID,
//   SLURM_STEP_NUM_TASKS, SLURM_LOCALID; the master from MASTER_ADDR, else the first host of
//   SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), and MASTER_PORT, else 15000 + SLURM_JOB_ID % 20000
//   (the same on every task of the job);
// - else a world of one.
// MASTER_ADDR may be a host name (torchrun and clusters set names; resolved by getaddrinfo).
// loupe's rendezvous listens on rdzv_port: MASTER_PORT, except under torchrun, whose agent's store
// already holds MASTER_PORT, where it is MASTER_PORT + 1; LOUPE_RDZV_PORT sets it in every case.
struct RankEnv {
  int rank = 0, local_rank = 0, world = 1;
  // The ranks on this host: LOCAL_WORLD_SIZE (loupe's launcher, torchrun), srun's tasks on the
  // step's first host (SLURM_STEP_TASKS_PER_NODE, "4(x2)" -> 4: rank 0's host); 1 when unknown.
  int local_world = 1;
  std::string master_addr;
  int master_port = 0, rdzv_port = 0;
  std::string launcher = "none";  // "loupe or torchrun" (WORLD_SIZE), "torchrun", "srun", "none"
};
RankEnv rank_env();
// Whether this process is a rank of a world its launcher started (WORLD_SIZE set, or srun's tasks).
bool in_a_world();
// For a message, the variables that make this process a rank, with their values (each at most 16
// characters): "WORLD_SIZE=2", "SLURM_PROCID=1 and SLURM_STEP_NUM_TASKS=2" (srun); "" when none.
std::string world_variables();
// The first host of a Slurm host list: "gpu-a[07-09,12],gpu-b3" -> "gpu-a07".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace loupe::parallel
