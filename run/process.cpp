#include "run/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "run/interrupt.h"

namespace loupe::run {

int run_child(const std::string& exe, const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  static char self[] = "loupe";
  argv.push_back(self);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  SignalsUnblocked child_takes_ctrl_c;  // the child inherits this thread's signal mask
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("cannot start a child process: ") + std::strerror(errno));
  if (pid == 0) {  // only async-signal-safe calls until exec: other threads may hold locks
    // Ends with this process, however it ends (a signal to it alone, its watchdog): no orphan
    // left measuring. A parent already gone before the call would not send it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string text_or_empty(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tail_of(const std::string& path, int lines) {
  const std::string t = text_or_empty(path);
  size_t pos = t.size();
  for (int n = 0; n <= lines && pos > 0; ++n) pos = t.rfind('\n', pos - 1);
  return t.substr(pos == std::string::npos ? 0 : pos + 1);
}

TempFile::TempFile(const std::string& stem) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  std::string p = (dir / (stem + "-XXXXXX")).string();
  const int fd = mkstemp(p.data());
  if (fd < 0) throw Error("cannot make a temporary file in " + dir.string() + ": " + std::strerror(errno));
  close(fd);
  path_ = p;
}

TempFile::~TempFile() { std::remove(path_.c_str()); }

}  // namespace loupe::run
