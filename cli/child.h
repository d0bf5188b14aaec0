// Running this binary again as a child process: bench's data-parallel runs and tune's rows each
// measure in a process of their own.
#pragma once
#include <string>
#include <vector>

namespace loupe::cli {

// Runs this binary (/proc/self/exe) with `args`, its stdout and stderr into the file `log`; returns
// its exit status (128 + the signal that ended it). Ctrl-C reaches the child as it reaches this
// process (run/interrupt.h); the child is sent SIGTERM when this process ends first.
int run_child(const std::vector<std::string>& args, const std::string& log);

// A file's text ("" where it cannot be read).
std::string text_or_empty(const std::string& path);
// Its last `lines` lines: a failed child's reason.
std::string tail_of(const std::string& path, int lines);

}  // namespace loupe::cli
