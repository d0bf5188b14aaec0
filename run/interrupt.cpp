#include "run/interrupt.h"

#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <thread>

namespace loupe::run {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<int> g_signal{0};
std::atomic<int64_t> g_first_ns{0};
std::atomic<int> g_critical{0};
sem_t g_wake;

constexpr double kGraceSeconds = 0.5;  // for the cooperative stop, before the watchdog acts

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Only async-signal-safe calls here: atomics, clock_gettime, sem_post, _exit.
extern "C" void on_signal(int sig) {
  const int64_t now = now_ns();
  if (!g_requested.exchange(true)) {
    g_signal = sig;
    g_first_ns = now;
    sem_post(&g_wake);
    return;
  }
  // A signal sent to the whole process group (as `timeout` does) can arrive twice at once.
  if (now - g_first_ns.load() > 1000000000) _exit(128 + sig);
}

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The signal thread: the only one that takes SIGINT and SIGTERM (route_signals_to_one_thread), so
// the handlers run on its stack. It waits for the first one, then acts as the watchdog.
void watchdog() {
  pthread_setname_np(pthread_self(), "loupe-signals");
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  while (sem_wait(&g_wake) != 0) {
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(kGraceSeconds));
  while (g_critical.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  static const char msg[] = "loupe: interrupted\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  _exit(interrupt_exit_status());
}

}  // namespace

void route_signals_to_one_thread() {
  static bool routed = false;
  if (routed) return;
  routed = true;
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  sem_init(&g_wake, 0, 0);
  std::thread(watchdog).detach();
}

void install_interrupt_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  route_signals_to_one_thread();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

const std::atomic<bool>& interrupt_requested() { return g_requested; }

int interrupt_exit_status() {
  const int sig = g_signal.load();
  return 128 + (sig ? sig : SIGINT);
}

SignalsUnblocked::SignalsUnblocked() {
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}
SignalsUnblocked::~SignalsUnblocked() {
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

CriticalSection::CriticalSection() { ++g_critical; }
CriticalSection::~CriticalSection() { --g_critical; }

}  // namespace loupe::run
