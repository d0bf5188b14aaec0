// The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput over every file of the
// directories (and files) it is given, in name order, so each target is also a plain test under
// any compiler. A crash or an escaping exception fails it, as it would fail the fuzzer; so does
// an empty corpus (a wrong path must not pass for a clean run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_util.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s CORPUS_DIR_OR_FILE...)\n", argv[0]);
    return 1;
  }
  double slowest = 0;
  std::string slowest_name;
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& p : files) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.string().c_str(), bytes.size());
    const auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > slowest) slowest = s, slowest_name = p.filename().string();
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("replayed %zu inputs in %.3f s (slowest %s, %.3f s)\n", files.size(), total, slowest_name.c_str(),
              slowest);
  return 0;
}
