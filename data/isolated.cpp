// Readers in a child process (data/isolated.h).
#include "data/isolated.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/file_check.h"

namespace loupe::data {
namespace {
bool pipe_write(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= size_t(w);
  }
  return true;
}

// Reads up to n bytes; returns how many (fewer only at the end of the pipe).
size_t pipe_read(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  size_t have = 0;
  while (have < n) {
    const ssize_t r = ::read(fd, c + have, n - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += size_t(r);
  }
  return have;
}

// The child: status 0 and the floats, or status 1 and the error's message. _exit: no atexit
// handlers, no destructors of the parent's objects.
[[noreturn]] void child(int fd, size_t floats, const std::function<void(float*)>& read) {
  // A damaged file may crash the library: the default action ends the child, whose parent words
  // the refusal (a sanitizer's handler would report it as a finding of loupe's).
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(s, SIG_DFL);
  char status = 1;
  std::string message;
  try {
    std::vector<float> out(floats);
    read(out.data());
    status = 0;
    if (pipe_write(fd, &status, 1) && pipe_write(fd, out.data(), floats * sizeof(float))) ::_exit(0);
    ::_exit(3);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "an unknown error";
  }
  pipe_write(fd, &status, 1);
  pipe_write(fd, message.data(), message.size());
  ::_exit(0);
}
}  // namespace

std::vector<float> read_in_child(const std::string& file, const std::string& library, size_t floats,
                                 const std::function<void(float* out)>& read) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(file + ": cannot read it in a child process: pipe: " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(file + ": cannot read it in a child process: fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], floats, read);
  }
  ::close(fds[1]);
  char status = 2;
  std::vector<float> out;
  std::string message;
  if (pipe_read(fds[0], &status, 1) == 1 && status == 0) {
    out.resize(floats);
    if (pipe_read(fds[0], out.data(), floats * sizeof(float)) != floats * sizeof(float)) status = 2;
  } else if (status == 1) {
    char buf[4096];
    for (size_t n; (n = pipe_read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  }
  ::close(fds[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (status == 1) throw Error(message);
  if (status == 0) return out;
  if (WIFSIGNALED(ws))
    refuse_file(file, library + " crashed on it (signal " + std::to_string(WTERMSIG(ws)) + " in the child process that read it): a damaged file");
  refuse_file(file, "its reader's child process ended without an answer (exit status " + std::to_string(WEXITSTATUS(ws)) + ")");
}

}  // namespace loupe::data
