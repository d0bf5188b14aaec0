// The table of LOUPE_* environment variables and their typed, parse-once reads (knobs.h).
#include "core/knobs.h"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.h"

namespace loupe::knobs {
namespace {

Knob row(const char* name, Kind kind, const char* read_by, const char* meaning, const char* fallback) {
  Knob k{};
  k.name = name, k.kind = kind, k.read_by = read_by, k.meaning = meaning, k.fallback = fallback;
  return k;
}

Knob flag_knob(const char* name, const char* read_by, bool on, const char* fallback, const char* meaning) {
  Knob k = row(name, Kind::Flag, read_by, meaning, fallback);
  k.on = on;
  return k;
}

Knob integer_knob(const char* name, const char* read_by, int64_t min, int64_t max, const char* fallback,
                  const char* meaning) {
  Knob k = row(name, Kind::Integer, read_by, meaning, fallback);
  k.min = min, k.max = max;
  return k;
}

Knob choice_knob(const char* name, const char* read_by, std::vector<std::string> choices, const char* fallback,
                 const char* meaning) {
  Knob k = row(name, Kind::Choice, read_by, meaning, fallback);
  k.choices = std::move(choices);
  return k;
}

Knob text_knob(const char* name, const char* read_by, const char* values, const char* fallback, const char* meaning) {
  Knob k = row(name, Kind::Text, read_by, meaning, fallback);
  k.values = values;
  return k;
}

// One read of a variable: its value (validated), or why it was refused.
struct Reading {
  std::optional<std::string> value;
  std::string error;
};

std::mutex g_mutex;
std::map<std::string, Reading>& readings_cache() {
  static auto* c = new std::map<std::string, Reading>;  // never destroyed: read by static destructors
  return *c;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Flag: return "a flag";
    case Kind::Integer: return "an integer";
    case Kind::Choice: return "a choice";
    case Kind::Text: return "a text";
  }
  return "?";
}

Reading parse_knob(const Knob& k) {
  Reading r;
  const char* env = std::getenv(k.name);
  if (!env || !*env) return r;  // unset or empty: the default
  const std::string v = env;
  bool ok = true;
  switch (k.kind) {
    case Kind::Flag: ok = v == "0" || v == "1"; break;
    case Kind::Integer: {
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(env, &end, 10);
      ok = *end == '\0' && errno == 0 && n >= k.min && n <= k.max;
      break;
    }
    case Kind::Choice: {
      ok = false;
      for (const std::string& c : k.choices) ok = ok || v == c;
      break;
    }
    case Kind::Text: break;
  }
  if (ok) r.value = v;
  else
    r.error = std::string(k.name) + "='" + v + "' is not allowed: " + k.name + " takes " + allowed(k) + " (" +
              k.meaning + "). Unset it for the default (" + k.fallback + ").";
  return r;
}

// The variable's value, read once; throws its refusal.
std::optional<std::string> read(const std::string& name, Kind want) {
  const Knob& k = find(name);
  if (k.kind != want)
    throw Error(name + " is " + kind_name(k.kind) + " knob, read as " + kind_name(want) +
                "; use the accessor of its kind (framework/core/knobs.h)");
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = readings_cache().find(name);
  if (it == readings_cache().end()) it = readings_cache().emplace(name, parse_knob(k)).first;
  if (!it->second.error.empty()) throw Error(it->second.error);
  return it->second.value;
}

}  // namespace

namespace {
// The table in docs/cli.md's order, in three parts: the library's, data parallelism's (`--gpus N`),
// the scripts' and tests'.
std::vector<Knob> library_knobs() {
  return {
      text_knob("LOUPE_DATA", "the library (`data/paths.cpp`), `data/fetch.sh`", "a directory",
                "`~/.cache/loupe`, then `./data`",
                "the first place to look for data sets (`$LOUPE_DATA/mnist`, `.../cifar10`, ...; docs/data.md), and "
                "where `data/fetch.sh` puts them"),
      integer_knob("LOUPE_NUM_THREADS", "the library", 1, 4096, "the cores this process may use",
                   "CPU threads when `--threads` is not given"),
      text_knob("LOUPE_TOOLS_DIR", "the `loupe` command", "a directory",
                "`../share/loupe` beside the installed command, else the source tree's `scripts/`",
                "where `loupe sweep` and `loupe roofline` find their plotting scripts"),
      flag_knob("LOUPE_FUSE", "the library", true, "1",
                "0: no fused bias + activation + dropout in `Sequential` and `Graph` (for comparison)"),
      flag_knob("LOUPE_FUSE_MLP", "the library (GPU)", true, "1",
                "0: no fused MLP (a `Sequential` stack of Linear + ReLU layers and a narrow head in one kernel "
                "forward, two backward, mnist_mlp's and the CNNs' dense heads; `ops/fused/mlp.h`) (for comparison)"),
      flag_knob("LOUPE_COMPUTE_COPY", "the library", true, "1",
                "0: fp16/bf16 cast weights on the fly instead of keeping one 16-bit copy"),
      flag_knob("LOUPE_CONV_GEMM", "the library (GPU)", true, "1",
                "0: bf16 convolutions with at most 16 filter values through cuDNN instead of im2col + GEMM"),
      choice_knob("LOUPE_GEMM_EPILOGUE", "the library (GPU)", {"auto", "on", "off"},
                  "`auto`: timed per shape",
                  "a Linear's bias in cuBLASLt's GEMM epilogues: where timed faster than cuBLAS's GEMM (`auto`), "
                  "always (`on`: the heuristic's first algorithm) or never (`off`)"),
      choice_knob("LOUPE_LSTM_ALGO", "the library (GPU), `bench_lstm`",
                  {"loupe", "loupe16", "loupe8", "step", "standard", "static", "small_h", "dynamic"},
                  "loupe's kernels (16 or 8 rows, timed); cuDNN's algorithms, timed, where those refuse",
                  "force the GPU LSTM: loupe's persistent kernels (`loupe`: 16 or 8 rows a block, `loupe16`, "
                  "`loupe8`), its stepwise ones (`step`), or one of cuDNN's algorithms"),
      choice_knob("LOUPE_LSTM_LAYOUT", "the library (GPU), `bench_lstm`", {"batch", "seq"},
                  "the fastest, timed per shape", "force cuDNN's LSTM layout"),
      choice_knob("LOUPE_VERBOSE", "the library (GPU)", {"conv", "lstm", "all"}, "nothing is printed",
                  "print to stderr how a kernel was chosen: each convolution's cuDNN candidates and what was kept "
                  "(`conv`), the LSTM candidates' times and the choice (`lstm`), or both (`all`)"),
  };
}

std::vector<Knob> ddp_knobs() {
  return {
      integer_knob("LOUPE_RDZV_PORT", "the library (`--gpus N`, torchrun, srun)", 1, 65535,
                   "MASTER_PORT (under torchrun MASTER_PORT + 1)",
                   "the port rank 0 listens on for loupe's rendezvous (torchrun's store holds MASTER_PORT)"),
      integer_knob("LOUPE_DDP_BUCKET_MB", "the library (`--gpus N`)", 1, 4096, "25",
                   "the size at which the gradient arena is cut into all-reduce buckets (the first is 1 MiB)"),
      flag_knob("LOUPE_DDP_SPLIT_BACKWARD", "the library (`--gpus N`)", true, "1",
                "0: the LSTM's weight gradient comes with its input's (one round), and the buckets keep the cut "
                "made before the first step (to compare)"),
      integer_knob("LOUPE_DDP_SM_CARVEOUT", "the library (`--gpus N`, GPU LSTM)", 0, 1024,
                   "24",
                   "the SMs left to the all-reduce (24: NCCL's collective channels between NVLink-4 GPUs; 0: none): "
                   "the LSTM's weight GEMMs that run beside it are planned for the others"),
      flag_knob("LOUPE_DDP_CHECK", "the library (`--gpus N`)", false, "0",
                "1: after every step, all-reduce a checksum of the weights and stop when the ranks differ"),
  };
}

std::vector<Knob> tool_knobs() {
  return {
      text_knob("LOUPE_CUDA_ARCH", "`tools/setup.sh`", "CUDA architectures (`90`, `80;90`)", "90",
                "the GPU architectures to build for"),
      text_knob("LOUPE_NVTX_LOG", "`tests/nvtx_recorder.cpp` (`test_nvtx`)", "a file", "nothing is recorded",
                "where the NVTX recorder that `test_nvtx` injects writes the ranges"),
      text_knob("LOUPE_TEST_FAULT", "`loupe_test_seams` (`tests/seams.cpp`, `check_ddp`)",
                "throw:RANK:STEP or delay:RANK:MS (MS up to 1000)", "no fault",
                "a test's fault in a data-parallel world, read by the test build of the command only: that rank "
                "throws an error at that step of an epoch (`throw`), or sleeps MS milliseconds as each training "
                "step begins, before its batch is fetched, so the sleep is its data wait (`delay`; "
                "`tests/check_ddp.sh`)"),
      choice_knob("LOUPE_TEST_REQUIRE", "`tests/gtest_main.cpp` (every GoogleTest binary)", {"cpu", "gpu", "multigpu"},
                  "a skipped case is a skip",
                  "set by CTest for the `gpu` and `multigpu` labels: on a machine with the GPUs (one; two) a "
                  "skipped case fails the test; `cpu` (CI) fails every skip but a case's not-here one "
                  "(docs/testing.md)"),
  };
}
}  // namespace

const std::vector<Knob>& table() {
  static const std::vector<Knob> t = [] {
    std::vector<Knob> all;
    for (auto part : {library_knobs, ddp_knobs, tool_knobs})
      for (Knob& k : part()) all.push_back(std::move(k));
    return all;
  }();
  return t;
}

const Knob& find(const std::string& name) {
  for (const Knob& k : table())
    if (name == k.name) return k;
  throw Error(name + " is not a loupe environment variable: add it to the table in framework/core/knobs.cpp "
              "(and docs/cli.md's, which the test_knobs test compares)");
}

std::string allowed(const Knob& k, bool markdown) {
  const std::string q = markdown ? "`" : "";
  switch (k.kind) {
    case Kind::Flag: return q + "0" + q + " or " + q + "1" + q;
    case Kind::Integer: return "a whole number from " + std::to_string(k.min) + " to " + std::to_string(k.max);
    case Kind::Choice: {
      std::string s;
      for (size_t i = 0; i < k.choices.size(); ++i)
        s += (i == 0 ? "" : i + 1 == k.choices.size() ? " or " : ", ") + q + k.choices[i] + q;
      return s;
    }
    case Kind::Text: return k.values;
  }
  return "";
}

bool flag(const std::string& name) {
  std::optional<std::string> v = read(name, Kind::Flag);
  return v ? *v == "1" : find(name).on;
}

std::optional<int64_t> integer(const std::string& name) {
  std::optional<std::string> v = read(name, Kind::Integer);
  if (!v) return std::nullopt;
  return std::strtoll(v->c_str(), nullptr, 10);
}

std::optional<std::string> choice(const std::string& name) { return read(name, Kind::Choice); }

std::optional<std::string> text(const std::string& name) { return read(name, Kind::Text); }

void reload() {
  std::lock_guard<std::mutex> lock(g_mutex);
  readings_cache().clear();
}

bool verbose(const std::string& what) {
  const std::optional<std::string> v = choice("LOUPE_VERBOSE");
  return v && (*v == what || *v == "all");
}

std::string markdown_table() {
  std::string s = "| variable | read by | values | default | effect |\n|---|---|---|---|---|\n";
  for (const Knob& k : table())
    s += std::string("| `") + k.name + "` | " + k.read_by + " | " + allowed(k, true) + " | " + k.fallback + " | " +
         k.meaning + " |\n";
  return s;
}

}  // namespace loupe::knobs
