// The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput over every file of the
// directories (and files) it is given, in name order, so each target is also a plain test under
// any compiler. A crash or an escaping exception fails it, as it would fail the fuzzer; so does
// an empty corpus (a wrong path must not pass for a clean run).
//
// --verbose prints each outcome (what each file is refused for). With --expect FILE CORPUS_DIR
// (the CTest tests), not crashing is not enough: each input's
// outcomes (every accepted() and rejected() of the target, in order) must match FILE's line for
// it, so that a check that stops refusing a bad file fails the test (format: docs/fuzzing.md).
// Every mismatch, input without a line and line without an input is one line of output and
// makes the exit status 1; so does a peak resident size past 1 GiB, named by the first input that
// took the process past it (docs/reliability.md: no hostile file up to 100 MB costs more; not under
// AddressSanitizer, whose shadow and quarantine count too).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"

namespace fs = std::filesystem;
using loupe::fuzz::Outcome;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif
constexpr long kPeakKiB = 1L << 20;  // 1 GiB

long peak_kib() {
  rusage ru{};
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

// One field of an expectation line: "accepted", "rejected REASON" (REASON a substring of the
// Error's message), "*" (either), or "..." last (the outcomes after it, whatever they are).
struct Expected {
  enum Kind { kAccepted, kRejected, kAny, kRest } kind;
  std::string reason;
};

struct Expectation {
  std::vector<Expected> outcomes;
  int line = 0;
  bool seen = false;
};

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

// NAME | OUTCOME | OUTCOME ...; a line that starts with | continues the line before it; blank
// lines and lines that start with # are comments. False, having said why, on any other line.
bool parse_expectations(const std::string& file, std::map<std::string, Expectation>* out) {
  std::ifstream f(file);
  if (!f) {
    std::fprintf(stderr, "replay: %s: cannot open the expectations\n", file.c_str());
    return false;
  }
  Expectation* last = nullptr;
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    ++n;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    auto bad = [&](const char* why) {
      std::fprintf(stderr, "replay: %s:%d: %s: %s\n", file.c_str(), n, why, line.c_str());
      return false;
    };
    std::vector<std::string> fields;
    for (size_t b = 0;;) {
      const size_t e = t.find('|', b);
      fields.push_back(trim(std::string_view(t).substr(b, e == std::string::npos ? e : e - b)));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    if (!fields[0].empty()) {
      const auto [it, added] = out->emplace(fields[0], Expectation{{}, n, false});
      if (!added) return bad("a second line for this file");
      last = &it->second;
    } else if (!last) {
      return bad("a continuation (|) with no file line before it");
    }
    for (size_t i = 1; i < fields.size(); ++i) {
      const std::string& s = fields[i];
      if (!last->outcomes.empty() && last->outcomes.back().kind == Expected::kRest)
        return bad("an outcome after ...");
      if (s == "accepted") last->outcomes.push_back({Expected::kAccepted, ""});
      else if (s == "*") last->outcomes.push_back({Expected::kAny, ""});
      else if (s == "...") last->outcomes.push_back({Expected::kRest, ""});
      else if (s.rfind("rejected ", 0) == 0 && !trim(s.substr(9)).empty())
        last->outcomes.push_back({Expected::kRejected, trim(s.substr(9))});
      else return bad("an outcome is accepted, rejected REASON, * or ... (last)");
    }
  }
  for (const auto& [name, x] : *out)
    if (x.outcomes.empty()) {
      std::fprintf(stderr, "replay: %s:%d: %s has no outcome\n", file.c_str(), x.line, name.c_str());
      return false;
    }
  return true;
}

bool matches(const Expected& x, const Outcome& o) {
  switch (x.kind) {
    case Expected::kAccepted: return o.accepted;
    case Expected::kRejected: return !o.accepted && o.message.find(x.reason) != std::string::npos;
    default: return true;
  }
}

std::string text(const Expected& x) {
  switch (x.kind) {
    case Expected::kAccepted: return "accepted";
    case Expected::kRejected: return "rejected \"" + x.reason + "\"";
    default: return "anything";
  }
}

std::string text(const Outcome& o) { return (o.accepted ? "accepted (" : "rejected (") + o.message + ")"; }

// The input's mismatches against its expectation, one line each.
std::vector<std::string> check(const Expectation& x, const std::vector<Outcome>& got) {
  std::vector<std::string> out;
  const bool rest = x.outcomes.back().kind == Expected::kRest;
  const size_t want = x.outcomes.size() - (rest ? 1 : 0);
  if (rest ? got.size() < want : got.size() != want) {
    std::string all;
    for (const Outcome& o : got) all += (all.empty() ? "" : " | ") + text(o);
    out.push_back("expected " + std::string(rest ? "at least " : "") + std::to_string(want) + " outcomes, got " +
                  std::to_string(got.size()) + ": " + all);
  }
  for (size_t i = 0; i < std::min(want, got.size()); ++i)
    if (!matches(x.outcomes[i], got[i]))
      out.push_back("outcome " + std::to_string(i + 1) + " of " + std::to_string(got.size()) + ": expected " +
                    text(x.outcomes[i]) + ", got " + text(got[i]));
  return out;
}

// The outcomes as an expectation line to start from (the messages still to be cut to a reason).
std::string as_line(const std::string& name, const std::vector<Outcome>& got) {
  std::string s = name;
  for (const Outcome& o : got) s += o.accepted ? " | accepted" : " | rejected " + o.message;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string expect_file;
  std::map<std::string, Expectation> expect;
  int first = 1;
  if (argc > 1 && std::strcmp(argv[1], "--verbose") == 0) {
    loupe::fuzz::verbose() = true;
    first = 2;
  }
  if (argc > first && std::strcmp(argv[first], "--expect") == 0) {
    std::error_code ec;
    if (argc != first + 3 || !fs::is_directory(argv[first + 2], ec)) {
      std::fprintf(stderr, "replay: usage: %s [--verbose] --expect EXPECT_FILE CORPUS_DIR\n", argv[0]);
      return 1;
    }
    expect_file = argv[first + 1];
    if (!parse_expectations(expect_file, &expect)) return 1;
    first += 2;  // the corpus directory is the input
  }
  std::vector<fs::path> files;
  for (int i = first; i < argc; ++i) {
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
    std::fprintf(stderr, "replay: no inputs (usage: %s [--verbose] [--expect EXPECT_FILE] CORPUS_DIR_OR_FILE...)\n",
                 argv[0]);
    return 1;
  }
  std::vector<Outcome> got;
  if (!expect_file.empty()) loupe::fuzz::outcomes() = &got;
  std::vector<std::string> mismatches;
  double slowest = 0;
  std::string slowest_name;
  bool past_peak = false;
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& p : files) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.string().c_str(), bytes.size());
    got.clear();
    const auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string name = p.filename().string();
    if (s > slowest) slowest = s, slowest_name = name;
    if (expect_file.empty()) continue;
    if (!kAsan && !past_peak && peak_kib() > kPeakKiB) {
      past_peak = true;
      mismatches.push_back(name + ": took the process to " + std::to_string(peak_kib() / 1024) +
                           " MiB resident, past the 1 GiB any corpus file may take");
    }
    const auto x = expect.find(name);
    if (x == expect.end()) {
      mismatches.push_back(name + ": no line in " + expect_file + "; its outcomes: " + as_line(name, got));
      continue;
    }
    x->second.seen = true;
    for (const std::string& m : check(x->second, got)) mismatches.push_back(name + ": " + m);
  }
  for (const auto& [name, x] : expect)
    if (!x.seen)
      mismatches.push_back(name + ": " + expect_file + ":" + std::to_string(x.line) +
                           " expects it, but the corpus has no such file");
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& m : mismatches) std::printf("replay: MISMATCH %s\n", m.c_str());
  std::printf("replayed %zu inputs in %.3f s (slowest %s, %.3f s)", files.size(), total, slowest_name.c_str(), slowest);
  if (!expect_file.empty()) std::printf(", %zu mismatch%s", mismatches.size(), mismatches.size() == 1 ? "" : "es");
  std::printf("\n");
  return mismatches.empty() ? 0 : 1;
}
