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
#pragma once
#include <atomic>

namespace loupe::tools {

// Installs the handlers for SIGINT and SIGTERM and starts the watchdog (once per process).
void install_interrupt_handlers();
// Set by the first signal; the trainer's hooks.stop.
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

}  // namespace loupe::tools
