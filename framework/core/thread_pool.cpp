#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/denormals.h"
#include "core/error.h"
#include "core/knobs.h"

#if LOUPE_WITH_DNNL
#include <omp.h>
#endif

namespace loupe {
namespace {

using Fn = std::function<void(int64_t, int64_t)>;

// True on a worker, and on a caller while it runs chunks: a parallel_for from there runs inline,
// so nested calls neither wait for busy workers (deadlock) nor oversubscribe the cores.
thread_local bool t_inside = false;

// The pool's threads are named (top -H, gdb, the signal test in test_train.cpp): once per thread.
void name_worker() {
  static thread_local bool named = false;
  if (!named) pthread_setname_np(pthread_self(), "loupe-cpu");
  named = true;
}

int initial_threads() {
  if (const std::optional<int64_t> n = knobs::integer("LOUPE_NUM_THREADS")) return int(*n);
  return usable_cores();
}

}  // namespace

bool num_threads_from_env() { return knobs::integer("LOUPE_NUM_THREADS").has_value(); }

namespace {
// Chunk c of `nchunks` over [begin, begin + n): the first n % nchunks chunks get one more. Both
// pools cut the same chunks, so a result never depends on which pool the build has.
std::pair<int64_t, int64_t> chunk(int64_t begin, int64_t n, int64_t nchunks, int64_t c) {
  const int64_t size = n / nchunks, rem = n % nchunks;
  const int64_t b = begin + c * size + std::min(c, rem);
  return {b, b + size + (c < rem)};
}

#if LOUPE_WITH_DNNL
// With oneDNN the CPU ops run on OpenMP's threads, the pool oneDNN's kernels already use
// (libgomp). Two pools of --threads threads each left one pool's threads spinning on the cores the
// other needed after every hand-over (a convolution, then loupe's bias + ReLU): in a cifar10_cnn
// step at 16 threads on the GPU host, conv3's forward took 11.2 ms, against 4.1 ms at 2 threads on
// the 2-core VM. One pool has no such hand-over; it is also how PyTorch's CPU ops thread
// (at::parallel_for on OpenMP). lab/benchmarks.md has the before and after.
std::atomic<int> g_threads{0};
std::mutex g_call;  // held by the one parallel_for that owns the team

int threads_now() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    static const int initial = initial_threads();
    n = initial;
  }
  return n;
}
#else
// Waking a sleeping thread costs tens of microseconds (a futex and an inter-processor interrupt,
// more in a VM), as long as a small op itself. So workers poll a little before sleeping, which
// lets back-to-back ops find them awake, and the caller polls for the last chunk to finish.
// yield() keeps the polling from starving other threads (the data loader) of a core.
template <class Ready>
void spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
  while (!ready() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

// A call publishes one job (fn, range, chunk count) and everyone, the caller included, claims
// chunks until none are left. Workers sleep on a condition variable between calls.
class Pool {
 public:
  std::mutex call_mutex;  // held by the one parallel_for that owns the pool

  explicit Pool(int n) { resize(n); }
  int size() const { return int(workers_.size()) + 1; }

  void resize(int n) {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      wake_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    stop_ = wake_ = false;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
  }

  void run(int64_t begin, int64_t n, int64_t nchunks, const Fn& fn) {
    std::unique_lock<std::mutex> lock(m_);
    fn_ = &fn, begin_ = begin, n_ = n, nchunks_ = nchunks, next_ = 0, done_ = 0, wake_ = true;
    // Wake only as many workers as there are chunks left after the caller's first one.
    if (nchunks - 1 >= int64_t(workers_.size())) work_cv_.notify_all();
    else for (int64_t i = 1; i < nchunks; ++i) work_cv_.notify_one();
    t_inside = true;
    drain(lock);
    t_inside = false;
    lock.unlock();
    spin_until([&] { return done_ == nchunks; });
    lock.lock();
    done_cv_.wait(lock, [&] { return done_ == nchunks_; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Claims and runs chunks until none are left; called with m_ held. Claiming under the lock
  // while next_ < nchunks_ means the job is still live (its caller waits for every claimed
  // chunk), so a worker that wakes late can never pick up a finished call's fn.
  void drain(std::unique_lock<std::mutex>& lock) {
    while (next_ < nchunks_) {
      const int64_t c = next_++;
      if (next_ == nchunks_) wake_ = false;
      const auto [b, e] = chunk(begin_, n_, nchunks_, c);
      const Fn& fn = *fn_;
      lock.unlock();
      apply_denormal_mode();  // the process's FTZ/DAZ setting, in this worker's register too
      std::exception_ptr err;
      try {
        fn(b, e);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (++done_ == nchunks_) done_cv_.notify_one();
    }
  }

  void work() {
    name_worker();
    t_inside = true;
    for (;;) {
      spin_until([&] { return wake_.load(std::memory_order_relaxed); });
      std::unique_lock<std::mutex> lock(m_);
      work_cv_.wait(lock, [&] { return stop_ || next_ < nchunks_; });
      if (stop_) return;
      drain(lock);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex m_;  // guards everything below
  std::condition_variable work_cv_, done_cv_;
  bool stop_ = false;
  const Fn* fn_ = nullptr;
  int64_t begin_ = 0, n_ = 0, nchunks_ = 0, next_ = 0;
  // Also read without the lock, by the polling loops (written under it).
  std::atomic<int64_t> done_{0};
  std::atomic<bool> wake_{false};  // unclaimed chunks, or stop_
  std::exception_ptr error_;
};

// Deliberately never destroyed: joining workers during static destruction could deadlock (exit()
// called from a worker) or race with other statics still using the pool.
Pool& worker_pool() {
  static Pool* p = new Pool(initial_threads());
  return *p;
}

#endif

}  // namespace

#if LOUPE_WITH_DNNL
int num_threads() { return threads_now(); }

void set_num_threads(int n) {
  LOUPE_CHECK(n >= 1, "set_num_threads needs n >= 1, got ", n);
  LOUPE_CHECK(!t_inside, "set_num_threads cannot be called from inside parallel_for");
  std::lock_guard<std::mutex> own(g_call);
  g_threads.store(n, std::memory_order_relaxed);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  const int64_t nchunks = std::min<int64_t>(threads_now(), n / std::max<int64_t>(grain, 1));
  if (nchunks <= 1 || t_inside || omp_in_parallel()) return fn(begin, end);
  // Another thread's call owns the team: run inline rather than start a second team.
  std::unique_lock<std::mutex> own(g_call, std::try_to_lock);
  if (!own.owns_lock()) return fn(begin, end);
  std::exception_ptr error;
  std::mutex error_mutex;
  // Always the whole team, even for fewer chunks (the threads past them skip): libgomp re-forms
  // its team whenever the size asked for changes, and a step whose ops asked for different sizes
  // ran mnist_mlp at 11,925 samples/s on 16 threads, against 67,148 with the whole team each time
  // (GPU host, lab/benchmarks.md). OpenMP may also start fewer threads than asked
  // (OMP_THREAD_LIMIT, OMP_DYNAMIC): each thread takes every team-size-th chunk, so every chunk
  // still runs once.
#pragma omp parallel num_threads(threads_now())
  {
    if (omp_get_thread_num() > 0) name_worker();
    apply_denormal_mode();  // the process's FTZ/DAZ setting, in OpenMP's threads (and oneDNN's) too
    t_inside = true;
    for (int64_t c = omp_get_thread_num(); c < nchunks; c += omp_get_num_threads()) {
      const auto [b, e] = chunk(begin, n, nchunks, c);
      try {
        fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
    t_inside = false;
  }
  if (error) std::rethrow_exception(error);
}
#else
int num_threads() { return worker_pool().size(); }

void set_num_threads(int n) {
  LOUPE_CHECK(n >= 1, "set_num_threads needs n >= 1, got ", n);
  LOUPE_CHECK(!t_inside, "set_num_threads cannot be called from inside parallel_for");
  Pool& p = worker_pool();
  std::lock_guard<std::mutex> own(p.call_mutex);
  p.resize(n);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  Pool& p = worker_pool();
  const int64_t nchunks = std::min<int64_t>(p.size(), n / std::max<int64_t>(grain, 1));
  if (nchunks <= 1 || t_inside) return fn(begin, end);
  // Another thread's call owns the pool: run inline rather than queue behind it.
  std::unique_lock<std::mutex> own(p.call_mutex, std::try_to_lock);
  if (!own.owns_lock()) return fn(begin, end);
  p.run(begin, n, nchunks, fn);
}

#endif

int cores_from_cpu_max(const std::string& text) {
  long long quota = 0, period = 0;
  if (std::sscanf(text.c_str(), "%lld %lld", &quota, &period) != 2 || quota <= 0 || period <= 0) return 0;
  return int((quota + period - 1) / period);
}

namespace {
int limit(int cores, int quota) { return quota > 0 ? std::min(cores, quota) : cores; }
}  // namespace

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return int(std::thread::hardware_concurrency());
}

int cores_within_cgroups(int cores, const std::string& proc_cgroup, const std::string& cgroup_root) {
  // Its cgroup and each one above it may hold a CPU quota; the smallest binds. cgroup v2: "0::/path"
  // in /proc/self/cgroup, the quota in cpu.max; v1: the "cpu" controller's line, the quota in
  // cpu.cfs_quota_us over cpu.cfs_period_us (-1: none).
  std::ifstream groups(proc_cgroup);
  std::string line;
  while (std::getline(groups, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const bool v2 = line.rfind("0::", 0) == 0, v1 = controllers.find(",cpu,") != std::string::npos;
    if (!v2 && !v1) continue;
    for (std::string path = line.substr(b + 1);; path = path.substr(0, path.rfind('/'))) {
      const std::string dir = (v2 ? cgroup_root : cgroup_root + "/cpu") + path;
      std::ifstream max(dir + "/cpu.max"), quota(dir + "/cpu.cfs_quota_us"), period(dir + "/cpu.cfs_period_us");
      std::string text, q, per;
      if (v2 && std::getline(max, text)) cores = limit(cores, cores_from_cpu_max(text));
      if (v1 && std::getline(quota, q) && std::getline(period, per)) cores = limit(cores, cores_from_cpu_max(q + " " + per));
      if (path.empty() || path == "/") break;
    }
  }
  return std::max(1, cores);
}

int usable_cores() { return cores_within_cgroups(affinity_cores(), "/proc/self/cgroup", "/sys/fs/cgroup"); }

}  // namespace loupe
