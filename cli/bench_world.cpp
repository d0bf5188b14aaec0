#include "cli/bench_world.h"

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
#include "instrument/report_io.h"
#include "instrument/scaling.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "run/interrupt.h"
#include "run/process.h"
#include "parallel/comm.h"
#include "train/trainer.h"

namespace loupe::cli {

namespace {
// What one (model, batch, precision) is measured with.
struct Config {
  std::string model, precision;
  int64_t batch = 0;
};

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
instrument::WorldFigures run_size(const Options& o, const Config& c, int gpus, int epochs, bool busy, const std::string& dir) {
  const std::string name = models::model_stem(c.model) + "-b" + std::to_string(c.batch) + "-" + c.precision + "-" + std::to_string(gpus) +
                           "gpu" + (busy ? "-busy" : "");
  const std::string metrics = dir + "/" + name + ".jsonl", log = dir + "/" + name + ".log";
  std::filesystem::remove(metrics);
  const int rc = run::run_child("/proc/self/exe", train_args(o, c, gpus, epochs, busy, metrics), log);
  instrument::WorldFigures f = instrument::world_figures(run::text_or_empty(metrics), gpus);
  if (rc != 0) {
    f = instrument::WorldFigures{};
    f.why = "the run exited " + std::to_string(rc) + "; its log: " + log;
    std::fprintf(stderr, "loupe bench: %s %d GPU(s) failed (exit %d):\n%s", c.model.c_str(), gpus, rc,
                 run::tail_of(log, 4).c_str());
  }
  return f;
}

// Every size in turn, --rounds times (alternating, so a drift of the machine hits every size
// alike), the fastest round kept; then one --busy run per size > 1 for NCCL's figures.
std::vector<instrument::WorldRow> measure_sizes(const Options& o, const Config& c, int epochs, const std::string& dir) {
  std::vector<instrument::WorldRow> rows;
  for (int g : o.gpus) rows.push_back(instrument::WorldRow{g, {}});
  for (int round = 0; round < o.rounds; ++round)
    for (instrument::WorldRow& r : rows) {
      instrument::WorldFigures f = run_size(o, c, r.gpus, epochs, false, dir);
      if (f.samples_per_sec && (!r.f.samples_per_sec || *f.samples_per_sec > *r.f.samples_per_sec)) r.f = f;
      if (!r.f.samples_per_sec && r.f.why.empty()) r.f.why = f.why;
    }
  for (instrument::WorldRow& r : rows) {
    if (r.gpus == 1 || !r.f.samples_per_sec) continue;
    instrument::WorldFigures b = run_size(o, c, r.gpus, epochs, true, dir);
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
  if (!parallel::nccl_built() && *std::max_element(o.gpus.begin(), o.gpus.end()) > 1)
    throw Error("--gpus " + gpus_text(o.gpus) + ": this loupe was built without NCCL (CMake prints loupe: NCCL: ON/OFF), so it "
                "runs one GPU only");
  if (o.device == "cpu") throw Error("loupe bench --gpus measures data parallelism on GPUs; --device cpu runs none");
  const int have = cuda_runtime() ? cuda_runtime()->device_count() : 0;
  const int want = *std::max_element(o.gpus.begin(), o.gpus.end());
  if (have < want)
    throw Error("--gpus " + gpus_text(o.gpus) + ": this host shows " + std::to_string(have) +
                " GPU(s) (nvidia-smi; CUDA_VISIBLE_DEVICES)");
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
  std::string csv = instrument::kScalingCsvHeader;
  std::string json;
  bool failed = false;
  for (const std::string& m : models) {
    const models::ModelInfo& info = models::find_model(m);
    std::vector<int64_t> batches = o.batch.empty() ? std::vector<int64_t>{info.recipe.batch} : o.batch;
    for (int64_t b : batches)
      for (Precision prec : o.precision) {
        const std::string p = precision_name(prec);
        std::printf("bench   %s, %s, batch %lld per GPU, GPUs %s: synthetic data resident on each GPU, %d epochs "
                    "per run (median of epochs 2..), best of %d round(s)\n",
                    m.c_str(), p.c_str(), (long long)b, gpus_text(o.gpus).c_str(), epochs, o.rounds);
        const Config c{m, p, b};
        std::vector<instrument::WorldRow> rows = measure_sizes(o, c, epochs, dir);
        std::printf("%s", instrument::world_table(rows).c_str());
        std::fflush(stdout);
        for (const instrument::WorldRow& r : rows) failed |= !r.f.samples_per_sec;
        instrument::add_scaling_rows(c.model, c.batch, c.precision, rows, csv, json);
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
