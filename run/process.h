// Running a program as a child process: bench's data-parallel runs and tune's rows each measure in
// a process of their own (docs/performance.md, "Tuning a run").
#pragma once
#include <string>
#include <vector>

namespace loupe::run {

// Runs the program `exe` (/proc/self/exe: this one) with `args`, its stdout and stderr into the file
// `log`; returns its exit status (128 + the signal that ended it). Ctrl-C reaches the child as it reaches this
// process (run/interrupt.h); the child is sent SIGTERM when this process ends first.
int run_child(const std::string& exe, const std::vector<std::string>& args, const std::string& log);

// A file's text ("" where it cannot be read).
std::string text_or_empty(const std::string& path);
// Its last `lines` lines: a failed child's reason.
std::string tail_of(const std::string& path, int lines);

// A file of its own in the temporary directory, removed with this object.
class TempFile {
 public:
  explicit TempFile(const std::string& stem);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace loupe::run
