#include "cli/bench_world.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/file_check.h"
#include "instrument/json_out.h"
#include "instrument/report_io.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "cli/compare.h"
#include "cli/flat_json.h"
#include "run/interrupt.h"
#include "parallel/comm.h"
#include "train/trainer.h"

namespace loupe::cli {

namespace {
// Each field's values by epoch, rank 0's records only (a one-GPU run's have no rank).
using ByEpoch = std::map<std::string, std::map<int, double>>;

std::optional<double> steady(const std::map<int, double>& per_epoch) {
  if (per_epoch.empty()) return std::nullopt;
  std::vector<double> later;
  for (const auto& [e, v] : per_epoch)
    if (e >= 2) later.push_back(v);
  return later.empty() ? std::optional<double>(per_epoch.rbegin()->second) : median(later);
}
}  // namespace

WorldFigures world_figures(const std::string& jsonl, int gpus) {
  WorldFigures f;
  ByEpoch by;
  std::istringstream in(jsonl);
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    std::string err;
    std::optional<FlatRecord> r = parse_flat_json(line, &err);
    if (!r || !number_of(*r, "epoch") || number_of(*r, "rank").value_or(0) != 0) continue;
    ++records;
    const int epoch = int(*number_of(*r, "epoch"));
    if (int(number_of(*r, "world_size").value_or(1)) != gpus) {
      f.why = "the records are of a world of " + std::to_string(int(number_of(*r, "world_size").value_or(1))) +
              ", not " + std::to_string(gpus);
      return f;
    }
    const char* sps = gpus > 1 ? "world_samples_per_sec" : "samples_per_sec";
    for (const char* key : {sps, "nccl_share", "nccl_exposed_share", "bus_gbps"})
      if (std::optional<double> v = number_of(*r, key)) by[key == sps ? "sps" : key][epoch] = *v;
  }
  f.samples_per_sec = steady(by["sps"]);
  f.nccl_share = steady(by["nccl_share"]);
  f.nccl_exposed_share = steady(by["nccl_exposed_share"]);
  f.bus_gbps = steady(by["bus_gbps"]);
  if (!f.samples_per_sec) f.why = records ? "no samples/s in the records" : "no records";
  return f;
}

std::optional<double> scaling_efficiency(const std::vector<WorldRow>& rows, size_t i) {
  const WorldRow* base = nullptr;
  for (const WorldRow& r : rows)
    if (r.f.samples_per_sec && (!base || r.gpus < base->gpus)) base = &r;
  const WorldRow& r = rows[i];
  if (!base || !r.f.samples_per_sec || *base->f.samples_per_sec <= 0) return std::nullopt;
  return *r.f.samples_per_sec * base->gpus / (r.gpus * *base->f.samples_per_sec);
}

std::string world_table(const std::vector<WorldRow>& rows) {
  auto pct = [](std::optional<double> v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100 * v.value_or(0));
    return v ? std::string(b) : std::string("n/a");
  };
  char buf[256];
  std::snprintf(buf, sizeof buf, "%5s %14s %12s %9s %19s %9s\n", "gpus", "samples/s", "per GPU", "scaling",
                "comm (not hidden)", "bus GB/s");
  std::string out = buf;
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorldRow& r = rows[i];
    const WorldFigures& f = r.f;
    const std::string sps = f.samples_per_sec ? instrument::thousands(*f.samples_per_sec) : "n/a";
    const std::string per = f.samples_per_sec ? instrument::thousands(*f.samples_per_sec / r.gpus) : "n/a";
    std::string nccl = "-", bus = "-";
    if (r.gpus > 1) {
      nccl = f.nccl_share ? pct(f.nccl_share) + " (" + pct(f.nccl_exposed_share) + ")" : "n/a";
      if (f.bus_gbps) {
        std::snprintf(buf, sizeof buf, "%.1f", *f.bus_gbps);
        bus = buf;
      } else {
        bus = "n/a";
      }
    }
    std::snprintf(buf, sizeof buf, "%5d %14s %12s %9s %19s %9s", r.gpus, sps.c_str(), per.c_str(),
                  pct(scaling_efficiency(rows, i)).c_str(), nccl.c_str(), bus.c_str());
    out += buf;
    if (!f.samples_per_sec) out += "  (" + f.why + ")";
    out += "\n";
  }
  return out;
}

namespace {
// What one (model, batch, precision) is measured with.
struct Config {
  std::string model, precision;
  int64_t batch = 0;
};

// Runs this binary with args, its output into log; returns its exit status (128 + signal if killed).
int run_child(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  static char self[] = "loupe";
  argv.push_back(self);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  run::SignalsUnblocked child_takes_ctrl_c;  // the child inherits this thread's signal mask
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("loupe bench --gpus: cannot start a run: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The last lines of a failed run's log, for the reason beside n/a.
std::string tail_of(const std::string& path, int lines) {
  const std::string t = read_text(path);
  size_t pos = t.size();
  for (int n = 0; n <= lines && pos > 0; ++n) pos = t.rfind('\n', pos - 1);
  return t.substr(pos == std::string::npos ? 0 : pos + 1);
}

// `loupe train` for one size: the timing run (no CUPTI: --busy slows the step) or the --busy run.
std::vector<std::string> train_args(const Options& o, const Config& c, int gpus, int epochs, bool busy,
                                    const std::string& metrics) {
  std::vector<std::string> a{"train", c.model, "--synthetic", "--resident", "--batch", std::to_string(c.batch),
                             "--precision", c.precision, "--epochs", std::to_string(epochs), "--plain",
                             "--seed", std::to_string(o.seed), "--metrics", metrics};
  if (gpus > 1) a.insert(a.end(), {"--gpus", std::to_string(gpus)});
  if (busy) a.push_back("--busy");
  if (!o.nvml) a.push_back("--no-nvml");
  if (o.channels_last) a.push_back("--channels-last");
  if (o.has("graph")) a.insert(a.end(), {"--graph", train::graph_mode_name(o.graph)});
  if (!o.loss.empty()) a.insert(a.end(), {"--loss", o.loss});
  return a;
}

// One run; its figures, or n/a with the reason (its log kept and named).
WorldFigures measure(const Options& o, const Config& c, int gpus, int epochs, bool busy, const std::string& dir) {
  const std::string name = models::model_stem(c.model) + "-b" + std::to_string(c.batch) + "-" + c.precision + "-" + std::to_string(gpus) +
                           "gpu" + (busy ? "-busy" : "");
  const std::string metrics = dir + "/" + name + ".jsonl", log = dir + "/" + name + ".log";
  std::filesystem::remove(metrics);
  const int rc = run_child(train_args(o, c, gpus, epochs, busy, metrics), log);
  WorldFigures f = world_figures(read_text(metrics), gpus);
  if (rc != 0) {
    f = WorldFigures{};
    f.why = "the run exited " + std::to_string(rc) + "; its log: " + log;
    std::fprintf(stderr, "loupe bench: %s %d GPU(s) failed (exit %d):\n%s", c.model.c_str(), gpus, rc,
                 tail_of(log, 4).c_str());
  }
  return f;
}

// Every size in turn, --rounds times (alternating, so a drift of the machine hits every size
// alike), the fastest round kept; then one --busy run per size > 1 for NCCL's figures.
std::vector<WorldRow> measure_sizes(const Options& o, const Config& c, int epochs, const std::string& dir) {
  std::vector<WorldRow> rows;
  for (int g : o.gpus_list) rows.push_back(WorldRow{g, {}});
  for (int round = 0; round < o.rounds; ++round)
    for (WorldRow& r : rows) {
      WorldFigures f = measure(o, c, r.gpus, epochs, false, dir);
      if (f.samples_per_sec && (!r.f.samples_per_sec || *f.samples_per_sec > *r.f.samples_per_sec)) r.f = f;
      if (!r.f.samples_per_sec && r.f.why.empty()) r.f.why = f.why;
    }
  for (WorldRow& r : rows) {
    if (r.gpus == 1 || !r.f.samples_per_sec) continue;
    WorldFigures b = measure(o, c, r.gpus, epochs, true, dir);
    r.f.nccl_share = b.nccl_share;
    r.f.nccl_exposed_share = b.nccl_exposed_share;
    r.f.bus_gbps = b.bus_gbps;
  }
  return rows;
}

std::string gpus_text(const std::vector<int>& g) {
  std::string s;
  for (int n : g) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

void check_world_options(const Options& o) {
  if (!parallel::nccl_built() && *std::max_element(o.gpus_list.begin(), o.gpus_list.end()) > 1)
    throw Error("--gpus " + gpus_text(o.gpus_list) + ": this loupe was built without NCCL (CMake prints loupe: NCCL: ON/OFF), so it "
                "runs one GPU only");
  if (o.device == "cpu") throw Error("loupe bench --gpus measures data parallelism on GPUs; --device cpu runs none");
  const int have = cuda_runtime() ? cuda_runtime()->device_count() : 0;
  const int want = *std::max_element(o.gpus_list.begin(), o.gpus_list.end());
  if (have < want)
    throw Error("--gpus " + gpus_text(o.gpus_list) + ": this host shows " + std::to_string(have) +
                " GPU(s) (nvidia-smi; CUDA_VISIBLE_DEVICES)");
}

std::string csv_cell(std::optional<double> v) {
  if (!v) return "";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", *v);
  return b;
}

// The rows of one configuration as CSV lines and as JSON Lines (the CSV's columns as fields, null
// where unmeasured).
void add_rows(const Config& c, const std::vector<WorldRow>& rows, std::string& csv, std::string& json) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorldFigures& f = rows[i].f;
    const std::optional<double> per =
        f.samples_per_sec ? std::optional<double>(*f.samples_per_sec / rows[i].gpus) : std::nullopt;
    const std::optional<double> v[] = {f.samples_per_sec, per, scaling_efficiency(rows, i), f.nccl_share,
                                       f.nccl_exposed_share, f.bus_gbps};
    const char* names[] = {"samples_per_sec", "samples_per_sec_per_gpu", "scaling_efficiency", "nccl_share",
                           "nccl_exposed_share", "bus_gbps"};
    csv += c.model + "," + std::to_string(c.batch) + "," + c.precision + "," + std::to_string(rows[i].gpus);
    nlohmann::ordered_json j{{"model", c.model}, {"batch", c.batch}, {"precision", c.precision}, {"gpus", rows[i].gpus}};
    for (size_t k = 0; k < 6; ++k) {
      csv += "," + csv_cell(v[k]);
      j[names[k]] = v[k] ? instrument::json_number(*v[k]) : nlohmann::ordered_json(nullptr);
    }
    csv += "\n";
    json += instrument::json_text(j) + "\n";
  }
}

void write_text(const std::string& path, const std::string& text) {
  write_whole_file(path, text);
  std::printf("wrote %s\n", path.c_str());
}
}  // namespace

int bench_world(const Options& o, const std::vector<std::string>& models) {
  check_world_options(o);
  const int epochs = o.epochs.value_or(6);
  std::string tmpl = (std::filesystem::temp_directory_path() / "loupe-bench-gpus-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw Error(std::string("loupe bench --gpus: cannot make a folder for the runs: ") +
                                         std::strerror(errno));
  const std::string dir = tmpl;
  std::string csv = "model,batch,precision,gpus,samples_per_sec,samples_per_sec_per_gpu,scaling_efficiency,"
                    "nccl_share,nccl_exposed_share,bus_gbps\n";
  std::string json;
  bool failed = false;
  for (const std::string& m : models) {
    const models::ModelInfo& info = models::find_model(m);
    std::vector<int64_t> batches = o.batches.empty() ? std::vector<int64_t>{info.recipe.batch} : o.batches;
    for (int64_t b : batches)
      for (const std::string& p : o.precisions) {
        std::printf("bench   %s, %s, batch %lld per GPU, GPUs %s: synthetic data resident on each GPU, %d epochs "
                    "per run (median of epochs 2..), best of %d round(s)\n",
                    m.c_str(), p.c_str(), (long long)b, gpus_text(o.gpus_list).c_str(), epochs, o.rounds);
        const Config c{m, p, b};
        std::vector<WorldRow> rows = measure_sizes(o, c, epochs, dir);
        std::printf("%s", world_table(rows).c_str());
        std::fflush(stdout);
        for (const WorldRow& r : rows) failed |= !r.f.samples_per_sec;
        add_rows(c, rows, csv, json);
      }
  }
  std::printf("comm: the all-reduce's share of the training time (NCCL's kernels; or, on one host, the copy\n"
              "engines' kernels and waits), in brackets the share not hidden behind backward; it and NCCL's bus\n"
              "bandwidth come from one more run per size with --busy, whose CUPTI tracing slows the step;\n"
              "samples/s and scaling from the runs without it.\n");
  if (!o.csv.empty()) write_text(o.csv, csv);
  if (!o.json.empty()) write_text(o.json, json);
  if (!failed) std::filesystem::remove_all(dir);
  else std::printf("the runs' logs and records are in %s\n", dir.c_str());
  return failed ? 1 : 0;
}

}  // namespace loupe::cli
