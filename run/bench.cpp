#include "run/bench.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "instrument/report_io.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "ops/view.h"
#include "run/data.h"
#include "run/report.h"
#include "run/run.h"

namespace loupe::run {

namespace {
std::string fmt_or_na(const instrument::Opt& v, const char* f, double scale = 1) {
  return v ? fmt(f, *v * scale) : "n/a";
}

// The model column: 14 wide, or as wide as the run's longest name (run_bench sets it); a model file
// by its base name ("my_cnn.json"), so that it stays apart from a reference model of the same stem.
int model_width = 14;
std::string model_column(const std::string& model) {
  return models::is_model_file(model) ? models::model_stem(model) + ".json" : model;
}

// cost: a last column, $ per million samples, when a price was given (--price-per-hour). A run has
// one device, so the table is the GPU's or the CPU's: on the CPU, where NVML, CUPTI and the pool have
// nothing to say, it shows the CPU's own figures instead of seven n/a columns.
void print_header(bool cpu, bool cost) {
  const char* c = cost ? "   $/M samples" : "";
  if (cpu)
    std::printf("%-*s %6s %5s %11s %8s %7s %5s %6s %8s %10s%s\n", model_width, "model", "batch", "prec", "samples/s", "ms/step",
                "threads", "cores", "waited", "GFLOP/s", "peak RSS", c);
  else
    std::printf("%-*s %6s %5s %11s %8s %6s %6s %6s %10s %7s %10s %5s%s\n", model_width, "model", "batch", "prec", "samples/s",
                "ms/step", "busy%", "util%", "MFU", "peak mem", "power W", "samples/J", "step", c);
}

std::string mib_or_na(const instrument::Opt& bytes) {
  if (!bytes) return "n/a";
  return fmt_or_na(bytes, "%.0f", 1.0 / double(1 << 20)) + " MiB";
}

// The CPU's row: the pool's threads (the run's, set by --threads), the cores the process kept busy
// (CPU seconds over wall seconds), the share of its ready time its threads waited for a core (a busy
// or oversubscribed machine), the FLOP rate, and the process's peak resident memory.
void print_cpu_row(const instrument::EpochReport& r, const std::string& ms, const std::string& cost) {
  instrument::Opt gflops;
  if (r.achieved_tflops) gflops = *r.achieved_tflops * 1e3;
  std::printf("%-*s %6lld %5s %11s %8s %7d %5s %6s %8s %10s%s\n", model_width, model_column(r.model).c_str(), (long long)r.batch,
              precision_name(r.precision), instrument::thousands(r.samples_per_sec).c_str(), ms.c_str(), num_threads(),
              fmt_or_na(r.host_cpu_util, "%.1f").c_str(), fmt_or_na(r.host_cpu_wait_share, "%.0f%%", 100).c_str(),
              fmt_or_na(gflops, "%.1f").c_str(), mib_or_na(r.host_rss_bytes).c_str(), cost.c_str());
}

void print_row(const instrument::EpochReport& r, bool cpu, bool cost) {
  instrument::Opt ms;
  if (r.steps > 0) ms = 1e3 * r.train_seconds / double(r.steps);
  const std::string c = cost ? "  " + fmt_or_na(r.cost_per_million_samples, "%12.4g") : "";
  if (cpu) {
    print_cpu_row(r, fmt_or_na(ms, "%.3f"), c);
    std::fflush(stdout);
    return;
  }
  instrument::Opt pool_mib;
  if (r.alloc_peak_bytes) pool_mib = *r.alloc_peak_bytes / double(1 << 20);
  // "graph" when the timed steps were replayed from a CUDA graph, else "eager".
  const char* step = r.graph_steps && *r.graph_steps >= r.steps && r.steps > 0 ? "graph" : "eager";
  std::printf("%-*s %6lld %5s %11s %8s %6s %6s %6s %10s %7s %10s %5s%s\n", model_width, model_column(r.model).c_str(),
              (long long)r.batch,
              precision_name(r.precision), instrument::thousands(r.samples_per_sec).c_str(), fmt_or_na(ms, "%.3f").c_str(),
              fmt_or_na(r.gpu_busy_share, "%.0f", 100).c_str(), fmt_or_na(r.gpu_util_mean, "%.0f").c_str(),
              fmt_or_na(r.mfu, "%.1f%%", 100).c_str(), (fmt_or_na(pool_mib, "%.0f") + (pool_mib ? " MiB" : "")).c_str(),
              fmt_or_na(r.power_mean_w, "%.0f").c_str(), r.samples_per_joule ? instrument::thousands(*r.samples_per_joule).c_str() : "n/a",
              step, c.c_str());
  std::fflush(stdout);
}
}  // namespace

namespace {
// One combination: a run of the model on the data set already loaded (resident), its warm-up, then
// the timed steps measured by the run's monitor. Full batches only: a last, smaller batch has new
// shapes, and choosing their algorithms (cuDNN plans are timed on first use) inside the timed steps
// cost cifar10_cnn at batch 1024 a factor of 3 in ms/step.
instrument::EpochReport time_combination(const BenchConfig& c, const models::ModelInfo& info,
                                const std::shared_ptr<const Data>& d, int64_t batch, Precision prec,
                                double min_seconds) {
  RunConfig rc;
  rc.model = info;
  rc.loaded = d;
  rc.feed.resident = true;
  rc.device = c.device;
  rc.trainer.precision = prec;
  rc.trainer.graph = c.graph;
  rc.trainer.stop_on_divergence = false;  // the steps asked for are timed; a divergence is reported below
  rc.seed = c.seed;
  rc.threads = num_threads();  // every combination at the count asked for
  rc.channels_last = c.channels_last;  // and fp16/bf16 convolutions, as `loupe train` (models/session.h)
  rc.batch = batch;
  rc.monitor.nvml = c.nvml;
  rc.monitor.busy = c.busy;
  rc.monitor.price_per_hour = c.price_per_hour;
  rc.interrupt = c.stop;  // between steps: Ctrl-C ends the measurement (its row is not written)
  Run run(std::move(rc));
  train::Trainer& trainer = run.trainer();
  const int64_t full = d->train.size() / batch;
  train::TensorDataset set{slice(d->train.x, 0, 0, full * batch), slice(d->train.y, 0, 0, full * batch),
                           d->train.x_scale};
  // The warm-up: algorithm choice, pool growth.
  if (trainer.train_epoch(set, batch, c.seed, 1, c.warmup, true).interrupted) throw train::Interrupted();
  int64_t steps = c.steps;
  if (min_seconds > 0) {  // ten more steps, timed, size the measurement
    train::EpochStats probe = trainer.train_epoch(set, batch, c.seed, 2, 10, true);
    if (probe.interrupted) throw train::Interrupted();
    double per_step = probe.train_seconds / double(std::max<int64_t>(1, probe.steps));
    steps = std::max(steps, std::min<int64_t>(1000000, int64_t(std::ceil(min_seconds / per_step))));
  }
  train::EpochStats st = trainer.train_epoch(set, batch, c.seed, 3, steps, true);
  if (st.interrupted) throw train::Interrupted();
  st.epoch = 1;
  if (st.diverged)
    std::fprintf(stderr, "note: %s batch %lld %s: the loss became NaN or infinite by step %lld of the timed run; "
                 "the time stands, but it is the time of non-finite arithmetic\n", info.name.c_str(),
                 (long long)batch, precision_name(prec), (long long)st.diverged_step);
  instrument::EpochReport r = epoch_report(info.name, c.device, batch, st, 1);
  run.monitor().fill(r);
  return r;
}

}  // namespace

std::vector<instrument::EpochReport> run_bench(const BenchConfig& o) {
  const Device dev = o.device;
  const std::string name = dev.is_cuda() ? cuda_runtime()->device_name() : "CPU";
  const double min_seconds = o.min_seconds >= 0 ? o.min_seconds : dev.is_cuda() ? 2.0 : 0.0;
  const int rounds = std::max(1, o.rounds);
  for (const std::string& m : o.models) model_width = std::max(model_width, int(model_column(m).size()));
  std::printf("device  %s; synthetic data resident on it; %lld warm-up steps, then at least %lld timed steps",
              dev.is_cuda() ? (dev.str() + " (" + name + ")").c_str() : "cpu", (long long)o.warmup,
              (long long)o.steps);
  if (min_seconds > 0) std::printf(" and %.1f s", min_seconds);
  std::printf(" each");
  if (rounds > 1) std::printf("; %d rounds, the fastest kept", rounds);
  std::printf("\n");
  // One slot per combination that runs, in the order of the first round.
  std::vector<std::optional<instrument::EpochReport>> best;
  const bool cost = o.price_per_hour >= 0;
  const bool cpu = !dev.is_cuda();
  for (int round = 1; round <= rounds; ++round) {
    if (rounds > 1) std::printf("round %d of %d\n", round, rounds);
    print_header(cpu, cost);
    size_t slot = 0;
    for (size_t mi = 0; mi < o.models.size(); ++mi) {
      const models::ModelInfo& ref = models::find_model(o.models[mi]);
      const models::ModelInfo info = o.loss.empty() ? ref : models::with_loss(ref, o.loss);
      // Made again each round: the pool's peak, reported, holds one model's data set at a time.
      DataRequest req = request_for(info);  // a model file's own arrays: synthetic ones of its input
      req.synthetic = true;
      req.resident = true;
      const auto d = std::make_shared<const Data>(load_data(req, dev));
      for (Precision prec : o.precisions) {
        std::string why = precision_unsupported(prec, dev);
        if (!why.empty()) {
          if (round == 1)
            std::printf("%-*s skipped %s: %s\n", model_width, model_column(info.name).c_str(), precision_name(prec), why.c_str());
          continue;
        }
        std::vector<int64_t> batches = o.batches.empty() ? std::vector<int64_t>{info.recipe.batch} : o.batches;
        for (int64_t batch : batches) {
          if (d->train.size() < batch) {
            if (round == 1)
              std::printf("%-*s skipped batch %lld: the data set holds %lld samples\n", model_width, model_column(info.name).c_str(),
                          (long long)batch, (long long)d->train.size());
            continue;
          }
          if (o.stop && o.stop->load()) throw train::Interrupted();
          instrument::EpochReport r = time_combination(o, info, d, batch, prec, min_seconds);
          print_row(r, cpu, cost);
          if (slot == best.size()) best.emplace_back();
          if (!best[slot] || r.samples_per_sec > best[slot]->samples_per_sec) best[slot] = r;
          ++slot;
          if (o.on_row) {
            std::vector<instrument::EpochReport> so_far;
            for (const auto& b : best) so_far.push_back(*b);
            o.on_row(so_far);
          }
        }
      }
    }
  }
  std::vector<instrument::EpochReport> reports;
  for (const auto& r : best) reports.push_back(*r);
  if (rounds > 1) {
    std::printf("fastest of %d rounds\n", rounds);
    print_header(cpu, cost);
    for (const auto& r : reports) print_row(r, cpu, cost);
  }
  return reports;
}

BenchFiles::BenchFiles(std::string json, std::string csv, bool append_csv)
    : json_(std::move(json)), csv_(std::move(csv)), append_csv_(append_csv) {}

namespace {
// The rows into PATH.tmp, renamed over PATH: a reader (or an interrupted run) sees the old file or
// the new one, whole.
void replace_whole(const std::string& path, const std::string& option, const std::vector<instrument::EpochReport>& rows,
                   bool json) {
  const std::string tmp = path + ".tmp";
  if (json) {
    instrument::JsonlWriter w(tmp, instrument::JsonlWriter::Mode::Truncate, option);
    for (const auto& r : rows) w.write(r);
  } else {
    instrument::CsvWriter w(tmp, option);
    for (const auto& r : rows) w.write(r);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(option + ": cannot write '" + path + "': " + why);
  }
}
}  // namespace

void BenchFiles::write(const std::vector<instrument::EpochReport>& rows) {
  if (!json_.empty()) replace_whole(json_, "--json", rows, true);
  if (!csv_.empty() && !append_csv_) {
    replace_whole(csv_, "--csv", rows, false);
  } else if (!csv_.empty()) {
    if (!csv_file_) csv_file_ = std::make_unique<instrument::CsvWriter>(csv_, "--csv");
    for (size_t i = rows_; i < rows.size(); ++i) csv_file_->write(rows[i]);  // flushed, a line at a time
  }
  opened_ = true;
  rows_ = rows.size();
}

std::string BenchFiles::names() const {
  if (json_.empty() || csv_.empty()) return json_ + csv_;
  return json_ + " and " + csv_;
}

void BenchFiles::say_written() const {
  if (!opened_) return;
  if (!json_.empty()) std::printf("wrote %s (JSON Lines, one record per row)\n", json_.c_str());
  if (!csv_.empty()) std::printf("wrote %s\n", csv_.c_str());
}

std::string sweep_summary(const std::vector<instrument::EpochReport>& rows) {
  if (rows.empty()) return "";
  char line[256];
  std::string out;
  const instrument::EpochReport* best = &rows[0];
  for (const auto& r : rows)
    if (r.samples_per_sec > best->samples_per_sec) best = &r;
  std::snprintf(line, sizeof line, "fastest: %s at batch %lld, %s samples/s\n", precision_name(best->precision),
                (long long)best->batch, instrument::thousands(best->samples_per_sec).c_str());
  out += line;
  std::vector<Precision> precs;
  for (const auto& r : rows)
    if (std::find(precs.begin(), precs.end(), r.precision) == precs.end()) precs.push_back(r.precision);
  auto of = [&](Precision p) {  // one precision's rows by batch
    std::vector<const instrument::EpochReport*> v;
    for (const auto& r : rows)
      if (r.precision == p) v.push_back(&r);
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->batch < b->batch; });
    return v;
  };
  for (Precision p : precs) {
    auto v = of(p);
    std::snprintf(line, sizeof line, "%s: batch %lld -> %lld multiplies samples/s by %.1f", precision_name(p),
                  (long long)v.front()->batch, (long long)v.back()->batch,
                  v.back()->samples_per_sec / std::max(1e-9, v.front()->samples_per_sec));
    out += line;
    bool busy = false, util = false;
    for (auto* r : v) busy |= bool(r->gpu_busy_share), util |= bool(r->gpu_util_mean);
    auto level = [&](const instrument::EpochReport* r) {  // percent: CUPTI busy where measured, else NVML
      return busy ? r->gpu_busy_share.value_or(0) * 100 : r->gpu_util_mean.value_or(0);
    };
    const instrument::EpochReport *sat = nullptr, *top = v.front();
    for (auto* r : v) {
      if (!sat && level(r) >= 90) sat = r;
      if (level(r) > level(top)) top = r;
    }
    const char* what = busy ? "GPU busy (CUPTI)" : "NVML utilisation";
    const instrument::EpochReport *lo = v.front(), *hi = v.back();
    if (!busy && !util && lo->device == "cpu" && lo->achieved_tflops && hi->achieved_tflops && lo->host_cpu_util &&
        hi->host_cpu_util)  // the CPU's own figures, at the smallest and the largest batch
      std::snprintf(line, sizeof line, "; GPU figures n/a; GFLOP/s %.1f -> %.1f, cores used %.1f -> %.1f",
                    *lo->achieved_tflops * 1e3, *hi->achieved_tflops * 1e3, *lo->host_cpu_util, *hi->host_cpu_util);
    else if (!busy && !util)
      std::snprintf(line, sizeof line, "; GPU figures n/a");
    else if (sat)
      std::snprintf(line, sizeof line, "; %s >= 90 %% from batch %lld", what, (long long)sat->batch);
    else
      std::snprintf(line, sizeof line, "; %s below 90 %% at every batch, at most %.0f %% (batch %lld)", what,
                    level(top), (long long)top->batch);
    out += line;
    out += "\n";
  }
  auto base = of(precs[0]);
  for (size_t i = 1; i < precs.size(); ++i) {
    std::string ratios;
    for (auto* r : of(precs[i]))
      for (auto* b : base)
        if (b->batch == r->batch && b->samples_per_sec > 0) {
          std::snprintf(line, sizeof line, "%s%.2fx at %lld", ratios.empty() ? "" : ", ",
                        r->samples_per_sec / b->samples_per_sec, (long long)r->batch);
          ratios += line;
        }
    if (!ratios.empty()) out += std::string(precision_name(precs[i])) + " against " + precision_name(precs[0]) + ": " + ratios + "\n";
  }
  return out;
}

}  // namespace loupe::run
