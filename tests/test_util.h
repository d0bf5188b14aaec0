// Small helpers shared by the test files.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/knobs.h"

// AddressSanitizer reserves terabytes of address space for its shadow memory, so no address-space
// limit (RLIMIT_AS) can be set under it: the bounded-memory checks below skip their limit there.
#if defined(__SANITIZE_ADDRESS__)
#define LOUPE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOUPE_TEST_ASAN 1
#endif
#endif
#ifndef LOUPE_TEST_ASAN
#define LOUPE_TEST_ASAN 0
#endif

namespace loupe::test {

// Sets an environment variable for one scope and restores it after; LOUPE_* knobs (core/knobs.h)
// are read again after each change.
struct EnvVar {
  std::string name;
  std::optional<std::string> old;
  EnvVar(const std::string& n, const std::string& v) : name(n) {
    if (const char* o = std::getenv(n.c_str())) old = o;
    setenv(n.c_str(), v.c_str(), 1);
    knobs::reload();
  }
  ~EnvVar() {
    old ? (void)setenv(name.c_str(), old->c_str(), 1) : (void)unsetenv(name.c_str());
    knobs::reload();
  }
};

// Unsets an environment variable for one scope and restores it after (knobs read again).
struct UnsetEnv {
  std::string name;
  std::optional<std::string> old;
  explicit UnsetEnv(const std::string& n) : name(n) {
    if (const char* o = std::getenv(n.c_str())) old = o;
    unsetenv(n.c_str());
    knobs::reload();
  }
  ~UnsetEnv() {  // as it was, whatever the test set meanwhile
    if (old) setenv(name.c_str(), old->c_str(), 1);
    else unsetenv(name.c_str());
    knobs::reload();
  }
};

// A path in the temporary directory that no other process uses: the pid in front of `name`, so
// that two test runs at once (two build trees on one machine) do not share files.
inline std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
}

// The whole file, as bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs a shell command: {its exit status (-1 when it did not exit), its stdout and stderr together}.
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  const auto out = temp_path("command_output.txt");
  const int rc = std::system((cmd + " > '" + out.string() + "' 2>&1").c_str());
  std::string text = slurp(out);
  std::filesystem::remove(out);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text};
}

// The address space this process has mapped now (VmSize), in bytes; 0 if unknown.
inline size_t mapped_bytes() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmSize:", 0) == 0) return size_t(std::strtoull(line.c_str() + 7, nullptr, 10)) * 1024;
  return 0;
}

// Runs f in a child process whose address space may grow by at most `limit` bytes past what it has
// mapped when forked (the test binary maps its libraries and thread stacks already, so the limit
// is on what f adds), and says how it ended: "error: <message>" for a loupe::Error, "bad_alloc"
// when memory ran out, "ok" when f returned, "other exception: ..." or "status N" otherwise. Under
// AddressSanitizer, f runs here, unlimited (see LOUPE_TEST_ASAN).
template <class F>
std::string run_with_memory_limit(F f, size_t limit = size_t(1) << 30) {
  auto outcome = [&]() -> std::string {
    try {
      f();
      return "ok";
    } catch (const loupe::Error& e) {
      return std::string("error: ") + e.what();
    } catch (const std::bad_alloc&) {
      return "bad_alloc";
    } catch (const std::exception& e) {
      return std::string("other exception: ") + e.what();
    }
  };
  if (LOUPE_TEST_ASAN) return outcome();
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    const size_t cap = mapped_bytes() + limit;
    const rlimit rl{cap, cap};
    const std::string what = setrlimit(RLIMIT_AS, &rl) == 0 ? outcome() : "setrlimit failed";
    ssize_t wrote = write(fds[1], what.data(), what.size());
    _exit(wrote == ssize_t(what.size()) ? 0 : 1);  // no atexit handlers: they belong to the test
  }
  close(fds[1]);
  std::string what;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) what.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return what + " (status " + std::to_string(status) + ")";
  return what;
}

// `exec PREFIX COMMAND` started in the background, its stdout and stderr on a pipe read as they
// come: for the tests that signal a running loupe (Ctrl-C) and watch what it printed. PREFIX is a
// command that execs the next in its place (taskset), so pid stays the signalled process's. The
// signal goes to that process only, never to a process group (that would reach ctest).
struct CliChild {
  pid_t pid = -1;
  int out = -1;
  std::string text;
  explicit CliChild(const std::string& command, const std::string& prefix = "") {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c", ("exec " + prefix + command).c_str(), (char*)nullptr);
      _exit(127);
    }
    close(fds[1]);
    out = fds[0];
    fcntl(out, F_SETFL, O_NONBLOCK);
  }
  ~CliChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
  CliChild(const CliChild&) = delete;
  CliChild& operator=(const CliChild&) = delete;
  static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
  void drain() {
    char buf[4096];
    ssize_t n;
    while ((n = read(out, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  }
  // Waits up to `seconds` for `marker` in the output.
  bool wait_for(const std::string& marker, double seconds) {
    const double end = now() + seconds;
    while (now() < end) {
      drain();
      if (text.find(marker) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // SIGINT, then the exit status and the seconds until the process ended (-1: still running after 10 s).
  std::pair<int, double> interrupt() {
    const double t0 = now();
    kill(pid, SIGINT);
    int status = 0;
    while (now() < t0 + 10) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        const double took = now() - t0;
        pid = -1;
        drain();
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), took};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return {-1, 10};
  }
};

// A made-up cgroup file system under a temporary folder, for the cgroup readers' test seams
// (cores_within_cgroups, cgroup_memory_free): proc() is a /proc/self/cgroup holding `proc`, sys()
// the root that stands in for /sys/fs/cgroup, holding `files` (path relative to it, text).
struct FakeCgroups {
  std::filesystem::path root;
  FakeCgroups(const std::string& name, const std::string& proc,
              const std::vector<std::pair<std::string, std::string>>& files)
      : root(temp_path(name)) {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "sys");
    std::ofstream(root / "cgroup") << proc;
    for (const auto& [path, text] : files) {
      std::filesystem::create_directories((root / "sys" / path).parent_path());
      std::ofstream(root / "sys" / path) << text << "\n";
    }
  }
  ~FakeCgroups() { std::filesystem::remove_all(root); }
  std::string proc() const { return (root / "cgroup").string(); }
  std::string sys() const { return (root / "sys").string(); }
};

}  // namespace loupe::test
