#include "parallel/launch.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "core/error.h"
#include "core/knobs.h"

namespace loupe::parallel {

namespace {

std::atomic<int> g_forward_signal{0};  // set by the launcher's handler, read by its wait loop
void on_launcher_signal(int sig) { g_forward_signal.store(sig); }

int status_of(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1; }

pid_t start_rank(const LaunchOptions& o, int local, int world, int port) {
  pid_t pid = fork();
  LOUPE_CHECK(pid >= 0, "cannot start rank ", local, ": fork failed: ", std::strerror(errno));
  if (pid > 0) return pid;
  setpgid(0, 0);  // its own group: the launcher stops a rank and everything it started
  sigset_t none;  // a rank starts with no signal blocked, whatever the launcher's thread blocks
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int rank = o.node_rank * o.procs + local;
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(o.procs).c_str(), 1);
  setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast stays off on shared hosts
  std::vector<char*> argv{const_cast<char*>(o.exe.c_str())};
  for (const std::string& a : o.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(o.exe.c_str(), argv.data());
  std::fprintf(stderr, "loupe: rank %d: cannot run %s: %s\n", rank, o.exe.c_str(), std::strerror(errno));
  _exit(127);
}

void signal_all(const std::vector<pid_t>& pids, int sig) {
  for (pid_t p : pids)
    if (p > 0) kill(-p, sig);
}

// Stops the ranks still running: SIGTERM, then SIGKILL after the grace period; reaps them.
void stop_all(std::vector<pid_t>& pids, double grace) {
  signal_all(pids, SIGTERM);
  const double deadline = now_s() + grace;
  for (;;) {
    bool any = false;
    for (pid_t& p : pids) {
      if (p <= 0) continue;
      int st = 0;
      if (waitpid(p, &st, WNOHANG) == p) p = -1;
      else any = true;
    }
    if (!any) return;
    if (now_s() > deadline) {
      signal_all(pids, SIGKILL);
      for (pid_t& p : pids)
        if (p > 0) waitpid(p, nullptr, 0), p = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int run_ranks(const LaunchOptions& o) {
  LOUPE_CHECK(o.procs >= 1 && o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes,
              "launch: ", o.procs, " processes on host ", o.node_rank, " of ", o.nnodes);
  const int world = o.procs * o.nnodes;
  const int port = o.master_port > 0 ? o.master_port : free_port();
  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_launcher_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_forward_signal.store(0);
  std::vector<pid_t> pids;
  for (int i = 0; i < o.procs; ++i) pids.push_back(start_rank(o, i, world, port));
  int result = 0, done = 0;
  bool signalled = false;  // Ctrl-C: the ranks' own exits (130) are no failure to report
  while (done < o.procs) {
    if (int sig = g_forward_signal.exchange(0)) {
      signal_all(pids, sig);  // Ctrl-C reaches every rank
      signalled = true;
    }
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] != p) continue;
      pids[i] = -1;
      ++done;
      if (status_of(st) != 0 && result == 0) {
        result = status_of(st);
        if (signalled) continue;  // the others got the same signal and are stopping by themselves
        std::fprintf(stderr, "loupe: rank %d exited with status %d; stopping the other %d rank(s)\n",
                     o.node_rank * o.procs + int(i), result, o.procs - done);
        stop_all(pids, o.grace_seconds);
        done = o.procs;
      }
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  LOUPE_CHECK(fd >= 0, "cannot open a socket: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
           getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  LOUPE_CHECK(ok, "cannot find a free port on 127.0.0.1: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// An IPv4 address, or a host name resolved by getaddrinfo (torchrun and clusters give names).
sockaddr_in address(const std::string& addr, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, addr.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(addr.c_str(), nullptr, &hints, &found);
  LOUPE_CHECK(rc == 0 && found, "rendezvous: cannot resolve the host '", addr, "' (MASTER_ADDR): ",
              rc ? gai_strerror(rc) : "no IPv4 address");
  a.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return a;
}

// Reads exactly n bytes before the deadline; false on a closed socket or the deadline.
bool read_exactly(int fd, char* p, size_t n, double deadline) {
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    int ms = int(std::max(0.0, deadline - now_s()) * 1000);
    if (poll(&pf, 1, ms) <= 0) return false;
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k, n -= size_t(k);
  }
  return true;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k, n -= size_t(k);
  }
  return true;
}

constexpr char kHello[8] = {'L', 'O', 'U', 'P', 'E', 'R', 'V', '1'};

void serve(const RendezvousOptions& o, const std::string& blob, double deadline, Lifelines* keep) {
  Fd s;
  s.fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = address(o.addr, o.port);
  LOUPE_CHECK(bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(s.fd, 64) == 0,
              "rendezvous: rank 0 cannot listen on ", o.addr, ":", o.port, ": ", std::strerror(errno),
              " (another run on that port? set MASTER_PORT)");
  std::set<int> seen;
  while (int(seen.size()) < o.world - 1) {
    pollfd pf{s.fd, POLLIN, 0};
    int ms = int(std::max(0.0, deadline - now_s()) * 1000);
    LOUPE_CHECK(poll(&pf, 1, ms) > 0, "rendezvous: ", seen.size(), " of the ", o.world - 1,
                " other ranks reached rank 0 at ", o.addr, ":", o.port, " within ", o.timeout_seconds,
                " s; the others never came (did they start? is the address reachable from them?)");
    Fd c;
    c.fd = accept(s.fd, nullptr, nullptr);
    if (c.fd < 0) continue;
    char hello[12];
    if (!read_exactly(c.fd, hello, sizeof hello, deadline) || std::memcmp(hello, kHello, 8) != 0) continue;
    int32_t r = 0;
    std::memcpy(&r, hello + 8, 4);
    LOUPE_CHECK(r >= 1 && r < o.world, "rendezvous: a peer says it is rank ", r, ", but the world has ranks 0..",
                o.world - 1);
    LOUPE_CHECK(!seen.count(r), "rendezvous: two processes say they are rank ", r, " (RANK set twice?)");
    seen.insert(r);
    uint32_t n = uint32_t(blob.size());
    LOUPE_CHECK(write_all(c.fd, reinterpret_cast<const char*>(&n), 4) && write_all(c.fd, blob.data(), blob.size()),
                "rendezvous: rank ", r, " went away before it got the id");
    if (keep) keep->add(r, std::exchange(c.fd, -1));
  }
}

std::string join_rendezvous(const RendezvousOptions& o, double deadline, Lifelines* keep) {
  sockaddr_in a = address(o.addr, o.port);
  for (;;) {
    Fd c;
    c.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      char hello[12];
      std::memcpy(hello, kHello, 8);
      int32_t r = o.rank;
      std::memcpy(hello + 8, &r, 4);
      uint32_t n = 0;
      if (write_all(c.fd, hello, sizeof hello) && read_exactly(c.fd, reinterpret_cast<char*>(&n), 4, deadline)) {
        std::string blob(n, '\0');
        LOUPE_CHECK(read_exactly(c.fd, blob.data(), n, deadline), "rendezvous: rank ", o.rank,
                    " got a cut reply from rank 0 at ", o.addr, ":", o.port);
        if (keep) keep->add(0, std::exchange(c.fd, -1));
        return blob;
      }
      // Rank 0 refused us (a duplicate or out-of-range rank): it says why on its side.
      LOUPE_FAIL("rendezvous: rank 0 at ", o.addr, ":", o.port, " closed the connection of rank ", o.rank,
                 " without the id (see rank 0's message)");
    }
    LOUPE_CHECK(now_s() < deadline, "rendezvous: rank ", o.rank, " could not reach rank 0 at ", o.addr, ":", o.port,
                " within ", o.timeout_seconds, " s (is rank 0 running? MASTER_ADDR and MASTER_PORT right?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  LOUPE_CHECK(end && *end == '\0' && x >= 0 && x < (1 << 20), name, "='", v, "' is not a whole number from 0");
  return int(x);
}

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool srun_world() {
  return !std::getenv("WORLD_SIZE") && std::getenv("SLURM_PROCID") && env_int("SLURM_STEP_NUM_TASKS", 1) > 1;
}

constexpr char kGoodbye = 'B';  // the one byte a lifeline ever carries after the rendezvous

}  // namespace

std::string rendezvous(const RendezvousOptions& o, const std::string& blob, Lifelines* keep) {
  LOUPE_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world, "rendezvous: rank ", o.rank, " of ", o.world);
  if (o.world == 1) return blob;
  const double deadline = now_s() + o.timeout_seconds;
  if (o.rank == 0) {
    serve(o, blob, deadline, keep);
    return blob;
  }
  return join_rendezvous(o, deadline, keep);
}

Lifelines::~Lifelines() {
  for (const Peer& p : peers_)
    if (p.fd >= 0) close(p.fd);
}

void Lifelines::add(int rank, int fd) { peers_.push_back(Peer{rank, fd}); }

std::string Lifelines::lost() {
  for (Peer& p : peers_) {
    if (p.fd < 0) continue;
    pollfd pf{p.fd, POLLIN, 0};
    if (poll(&pf, 1, 0) <= 0) continue;  // nothing to read: the peer is there
    char c = 0;
    const ssize_t k = recv(p.fd, &c, 1, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    close(p.fd);
    p.fd = -1;
    if (k == 1 && c == kGoodbye) continue;  // it ended normally
    return "rank " + std::to_string(p.rank) + "'s connection closed without a goodbye (the process ended)";
  }
  return "";
}

void Lifelines::goodbye() {
  for (Peer& p : peers_) {
    if (p.fd < 0) continue;
    write_all(p.fd, &kGoodbye, 1);  // a peer gone already does not matter now
    close(p.fd);
    p.fd = -1;
  }
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets; a bracket holds ranges and lists of
  // numbers, and the first of them, zero padding kept, completes the name.
  const size_t open = nodelist.find('['), comma = nodelist.find(',');
  if (open == std::string::npos || (comma != std::string::npos && comma < open)) return nodelist.substr(0, comma);
  const size_t end = nodelist.find_first_of("-,]", open + 1);
  LOUPE_CHECK(end != std::string::npos && end > open + 1, "Slurm's node list '", nodelist, "' has an unclosed '['");
  return nodelist.substr(0, open) + nodelist.substr(open + 1, end - open - 1);
}

bool in_a_world() { return std::getenv("WORLD_SIZE") != nullptr || srun_world(); }

std::string world_variables() {
  auto named = [](const char* name) {
    const std::string v = env_text(name);
    return std::string(name) + "=" + (v.size() <= 16 ? v : v.substr(0, 16) + "...");
  };
  if (std::getenv("WORLD_SIZE")) return named("WORLD_SIZE");
  if (srun_world()) return named("SLURM_PROCID") + " and " + named("SLURM_STEP_NUM_TASKS");
  return "";
}

RankEnv rank_env() {
  RankEnv e;
  std::string addr = env_text("MASTER_ADDR");
  e.master_port = env_int("MASTER_PORT", 0);
  if (srun_world()) {
    e.launcher = "srun";
    e.world = env_int("SLURM_STEP_NUM_TASKS", 1);
    e.rank = env_int("SLURM_PROCID", 0);
    e.local_rank = env_int("SLURM_LOCALID", 0);
    e.local_world = std::max(1, std::atoi(env_text("SLURM_STEP_TASKS_PER_NODE").c_str()));  // its leading count
    if (addr.empty()) {
      std::string nodes = env_text("SLURM_STEP_NODELIST");
      if (nodes.empty()) nodes = env_text("SLURM_JOB_NODELIST");
      LOUPE_CHECK(!nodes.empty(), "srun: neither MASTER_ADDR nor SLURM_STEP_NODELIST / SLURM_JOB_NODELIST is set");
      addr = first_slurm_host(nodes);
    }
    if (e.master_port == 0) e.master_port = 15000 + int(std::strtoull(env_text("SLURM_JOB_ID").c_str(), nullptr, 10) % 20000);
  } else {
    e.world = env_int("WORLD_SIZE", 1);
    e.rank = env_int("RANK", 0);
    e.local_rank = env_int("LOCAL_RANK", e.rank);
    e.local_world = std::max(1, env_int("LOCAL_WORLD_SIZE", 1));
    e.launcher = std::getenv("TORCHELASTIC_RUN_ID") ? "torchrun" : std::getenv("WORLD_SIZE") ? "loupe or torchrun" : "none";
  }
  LOUPE_CHECK(e.world >= 1, "the world size must be at least 1 (WORLD_SIZE or SLURM_STEP_NUM_TASKS)");
  LOUPE_CHECK(e.rank < e.world, "rank ", e.rank, " of a world of ", e.world, " (RANK or SLURM_PROCID)");
  e.master_addr = addr.empty() ? "127.0.0.1" : addr;
  LOUPE_CHECK(e.world == 1 || e.master_port > 0, "a world of ", e.world,
              " needs MASTER_PORT (the port rank 0 listens on)");
  LOUPE_CHECK(e.world == 1 || e.master_port < 65536, "MASTER_PORT=", e.master_port,
              " is out of range: a port is 1-65535");
  // torchrun's agent hosts its store on MASTER_PORT: loupe's rendezvous takes the next port.
  e.rdzv_port = e.launcher == "torchrun" ? e.master_port + 1 : e.master_port;
  if (const std::optional<int64_t> p = knobs::integer("LOUPE_RDZV_PORT")) e.rdzv_port = int(*p);
  return e;
}

}  // namespace loupe::parallel
