// EpochMonitor: gathers, for one epoch, everything the report shows: step timings, NVML samples,
// CUPTI busy time, FLOPs, allocator and process memory, and turns them into an EpochReport.
#pragma once
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/precision.h"
#include "instrument/nvml_sampler.h"
#include "instrument/report.h"

namespace loupe::instrument {

class NvmlSampler;
class BusyTracker;
struct ActivityRecord;
class TimelineWriter;

// Another rank's GPU on this host, for rank 0's timeline (--gpus N): its CUDA device and its rank,
// the `gpu` value of its rows.
struct TimelinePeer {
  int device = 0;
  int rank = 0;
};

struct MonitorOptions {
  bool nvml = true;
  int nvml_period_ms = 50;
  bool busy = false;            // CUPTI activity records (--busy)
  double price_per_hour = -1;   // --price-per-hour; < 0: no cost figures
  Precision precision = Precision::FP32;
  std::string timeline;         // --timeline FILE.csv: NVML's samples and the run's marks; "" = none
  // Data parallelism, rank 0: its own rank (the `gpu` value of its GPU's rows; < 0: the device's
  // index) and its host's other ranks, whose GPUs the timeline samples too (NVML needs no context).
  int timeline_rank = -1;
  std::vector<TimelinePeer> timeline_peers;
  bool nccl = false;            // data parallelism: NCCL's share of the busy time (with busy)
};

class EpochMonitor {
 public:
  EpochMonitor(Device device, const MonitorOptions& opt);
  ~EpochMonitor();

  void begin_epoch();
  // Per step, on the host: the step starts, its batch is ready, its work is enqueued.
  void step_begin();
  // gpu_wait_ms: of the wait since step_begin, the time the loader's slot was held by the GPU
  // (back-pressure): counted apart from the data wait.
  void data_ready(double gpu_wait_ms = 0);
  void step_issued(double step_flops);
  // After the training loop, once the device has finished the epoch's work.
  void end_train();
  // Fills the measured fields of r (time, learning and identity fields are the caller's).
  void fill(EpochReport& r);
  // The GPU's figures (NVML's and GPM's, samples/J from r.samples) over [t0, t1] on
  // NvmlSampler::now()'s clock, in place of the epoch's: a stretch of several epochs
  // (run::Run::measure). The last epoch's training began at train_begin() and ended at train_end().
  void fill_gpu(EpochReport& r, double t0, double t1) const;
  double train_begin() const { return t0_; }
  double train_end() const { return t_end_; }

  BusyTracker* busy_tracker() { return busy_.get(); }
  const std::string& nvml_why() const { return nvml_why_; }
  const std::string& busy_why() const { return busy_why_; }  // why there is no busy tracker

  // The timeline (MonitorOptions::timeline): a mark row now ("epoch_start", "eval_start",
  // "eval_end", "checkpoint", "epoch_end"); at "epoch_end" the samples taken so far are appended
  // and the file flushed. No-ops without a timeline. The destructor writes the rest.
  void mark(const char* what);
  // One line for the console: where the timeline goes and what it holds ("" without one).
  std::string timeline_note() const;
  // This GPU's NVML samples [first, end) so far (none without NVML): --tensorboard's gpu/ series.
  std::vector<GpuSample> gpu_samples_from(size_t first) const;

 private:
  void fill_busy(EpochReport& r);
  void fill_nccl(EpochReport& r, const std::vector<ActivityRecord>& recs, uint64_t busy_ns);
  void start_timeline_peers();
  std::future<std::map<int, double>> read_delays() const;
  double waited();
  Device device_;
  MonitorOptions opt_;
  std::unique_ptr<NvmlSampler> nvml_;
  // The timeline's other GPUs (MonitorOptions::timeline_peers), with their ranks; those that could
  // not be sampled are said in peers_missing_.
  std::vector<std::unique_ptr<NvmlSampler>> peers_;
  std::vector<int> timeline_ranks_;  // every sampled GPU's rank, this one's first
  std::string peers_missing_;
  std::unique_ptr<BusyTracker> busy_;
  std::unique_ptr<TimelineWriter> timeline_;
  std::string nvml_why_, busy_why_;
  double t0_ = 0, t_end_ = 0, cpu0_ = 0, cpu_end_ = 0;
  // Each thread's run delay at the training's start and end (read_delays), read by fill().
  std::future<std::map<int, double>> delay0_, delay_end_;
  uint64_t busy_t0_ = 0, busy_t1_ = 0;
  double step_t0_ = 0, data_t_ = 0, last_step_begin_ = -1, flops_ = 0;
  std::vector<double> step_ms_, issue_ms_, wait_ms_;
  double gpu_wait_ms_ = 0;  // the epoch's back-pressure, summed
};

// The p-th percentile (0..100) of v by linear interpolation; empty for an empty v.
std::optional<double> percentile(std::vector<double> v, double p);

// What fill() derives from the epoch's FLOPs over `wall`, the monitor's seconds of training, and
// from the record's own fields (docs/profiling.md): FLOPs per sample, the FLOP rate, MFU (that rate
// over r.peak_tflops), samples per joule of r.energy_j, and at price_per_hour >= 0 the epoch's cost
// and the cost per million samples. A figure without its inputs stays unset: n/a, never 0. Apart
// from fill() so that each formula is tested with figures a CPU cannot measure (a peak, an energy).
void derive_figures(EpochReport& r, double flops, double wall, double price_per_hour);

}  // namespace loupe::instrument
