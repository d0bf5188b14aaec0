// Small helpers shared by the test files.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "core/knobs.h"

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

}  // namespace loupe::test
