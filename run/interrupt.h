// Stopping `loupe train` on Ctrl-C (SIGINT) or SIGTERM within a second, whatever it is doing, with
// nothing half-written.
//
// The first signal sets a flag that the training loop reads between steps and the evaluation
// between batches: the run stops there and says where. Work that reads no flag (a data set
// loading, a long evaluation batch on the CPU) is cut short by a watchdog thread, which ends the
// process with status 128 + signal half a second after the signal unless it has exited by then.
// The watchdog waits for a critical section (a checkpoint or metrics line being written) to end
// first, so a file is either written whole or not touched. A second signal more than a second
// after the first ends the process at once.
//
// Every handler runs on one thread that does no computing, never on a thread that may be inside
// a kernel: oneDNN's float32 GEMM kernels (up to 3.11; Debian's 2.6) point the stack pointer at
// a heap buffer while they run, and the frame the kernel pushes to run a signal handler there
// corrupts the heap (oneDNN issue #4845, fixed by its PR #4855). Ctrl-C during CPU training
// crashed 3-7 runs in 25 that way ("malloc(): unaligned tcache chunk detected").
#pragma once
#include <atomic>

namespace loupe::run {

// First thing in main(), before any other thread exists: blocks SIGINT and SIGTERM in the
// calling thread, so in every thread started later, and starts the one thread that takes them.
// Until handlers are installed a signal does what it always does (ends the process).
void route_signals_to_one_thread();
// Installs the handlers for SIGINT and SIGTERM (once per process; routes signals first if
// route_signals_to_one_thread was not called).
void install_interrupt_handlers();
// While one exists, the calling thread takes SIGINT and SIGTERM too: around starting a child
// process (std::system), which inherits the signal mask and would otherwise ignore Ctrl-C.
class SignalsUnblocked {
 public:
  SignalsUnblocked();
  ~SignalsUnblocked();
  SignalsUnblocked(const SignalsUnblocked&) = delete;
  SignalsUnblocked& operator=(const SignalsUnblocked&) = delete;
};
// Set by the first signal; what the run's Control watches (train/observer.h).
const std::atomic<bool>& interrupt_requested();
// 130 after SIGINT, 143 after SIGTERM (the shell's 128 + signal number).
int interrupt_exit_status();

// While one exists, the watchdog does not end the process.
class CriticalSection {
 public:
  CriticalSection();
  ~CriticalSection();
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;
};

}  // namespace loupe::run
