// Shared by the fuzz targets: the bytes as a file for readers that take a path, and the entry
// point's signature. Each target defines LLVMFuzzerTestOneInput; libFuzzer calls it (the
// LOUPE_FUZZ build) or replay_main.cpp does, once per file of a corpus (every build).
//
// A loupe::Error is a clean rejection and is caught by the target; anything else (a crash, a
// sanitizer report, another exception escaping, an allocation over libFuzzer's -malloc_limit_mb)
// is a finding.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace loupe::fuzz {

// What a target did with one reading of an input: accepted (`message` says as what) or rejected
// (`message` is the Error's).
struct Outcome {
  bool accepted;
  std::string message;
};

// The current input's outcomes in order, where replay_main.cpp checks them against the corpus'
// expectations (docs/fuzzing.md); null, so nothing is kept, under libFuzzer.
inline std::vector<Outcome>*& outcomes() {
  static std::vector<Outcome>* o = nullptr;
  return o;
}

// Whether each outcome is printed: a replay's --verbose (to see what each file is refused for);
// never under libFuzzer.
inline bool& verbose() {
  static bool v = false;
  return v;
}

// A clean rejection: recorded for a replay with expectations, and printed under --verbose.
inline void rejected(const std::exception& e) {
  if (verbose()) std::fprintf(stderr, "  rejected: %s\n", e.what());
  if (outcomes()) outcomes()->push_back({false, e.what()});
}

// The same for an accepted input.
inline void accepted(const char* what) {
  if (verbose()) std::fprintf(stderr, "  accepted: %s\n", what);
  if (outcomes()) outcomes()->push_back({true, what});
}

// A file of this process (in /dev/shm where there is one: no disk traffic), rewritten for every
// input and removed at exit. `suffix` lets a target give it a name a reader cares about (".gz").
class TempFile {
 public:
  explicit TempFile(const std::string& suffix = "") {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                              : std::filesystem::temp_directory_path();
    path_ = (dir / ("loupe_fuzz_" + std::to_string(getpid()) + "_" + std::to_string(counter()++) + suffix)).string();
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();  // the harness itself failed: not a finding in the reader
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string path_;
};

}  // namespace loupe::fuzz
