#include "instrument/monitor.h"

#include <algorithm>
#include <cstdio>

#include "core/cuda_runtime.h"
#include "instrument/busy_tracker.h"
#include "instrument/intervals.h"
#include "instrument/host_stats.h"
#include "instrument/nvml_sampler.h"
#include "instrument/peak.h"
#include "instrument/timeline.h"

namespace loupe::instrument {

std::optional<double> percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  double pos = p / 100.0 * double(v.size() - 1);
  size_t lo = size_t(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

namespace {
// samples/J from the report's samples and energy; none without an energy.
void set_samples_per_joule(EpochReport& r) {
  r.samples_per_joule.reset();
  if (r.energy_j && *r.energy_j > 0) r.samples_per_joule = double(r.samples) / *r.energy_j;
}
}  // namespace

void derive_figures(EpochReport& r, double flops, double wall, double price_per_hour) {
  if (r.samples > 0 && flops > 0) r.flops_per_sample = flops / double(r.samples);
  if (wall > 0 && flops > 0) r.achieved_tflops = flops / wall / 1e12;
  if (r.achieved_tflops && r.peak_tflops) r.mfu = *r.achieved_tflops / *r.peak_tflops;
  set_samples_per_joule(r);
  if (price_per_hour >= 0) {
    r.cost_epoch = price_per_hour * r.epoch_seconds / 3600.0;
    if (r.samples > 0 && r.train_seconds > 0)
      r.cost_per_million_samples = price_per_hour * (r.train_seconds / 3600.0) * 1e6 / double(r.samples);
  }
}

EpochMonitor::EpochMonitor(Device device, const MonitorOptions& opt) : device_(device), opt_(opt) {
  // The timeline's file first (an error there starts nothing); its t = 0 is before the first sample.
  const int own_label = opt.timeline_rank >= 0 ? opt.timeline_rank : device.is_cuda() ? device.index : 0;
  if (!opt.timeline.empty()) timeline_ = std::make_unique<TimelineWriter>(opt.timeline, NvmlSampler::now(), own_label);
  if (!device.is_cuda()) {
    nvml_why_ = "training on the CPU";
    busy_why_ = "training on the CPU";
  } else {
    if (opt.nvml) {
      nvml_ = std::make_unique<NvmlSampler>(device.index, opt.nvml_period_ms, cuda_runtime()->pci_bus_id());
      if (!nvml_->available()) {
        nvml_why_ = nvml_->why_unavailable();
        nvml_.reset();
      } else {
        nvml_->start();
      }
    } else {
      nvml_why_ = "NVML sampling is off (--no-nvml)";
    }
    if (opt.busy) {
      busy_ = make_busy_tracker(&busy_why_);
      if (busy_) {
        try {
          busy_->start();
        } catch (const std::exception& e) {
          busy_why_ = e.what();
          busy_.reset();
        }
      }
    } else {
      busy_why_ = "CUPTI busy time is off (use --busy)";
    }
  }
  if (timeline_) {
    timeline_->attach(nvml_.get());
    if (nvml_) {
      timeline_ranks_.push_back(own_label);
      start_timeline_peers();
    }
  }
}

// A sampler per other GPU of the host, for the timeline only (the report is each rank's own); one
// that cannot be had is left out and said in the timeline's note.
void EpochMonitor::start_timeline_peers() {
  const int visible = cuda_runtime()->device_count();
  for (const TimelinePeer& p : opt_.timeline_peers) {
    std::string why;
    if (p.device < 0 || p.device >= visible) {
      why = "CUDA device " + std::to_string(p.device) + " is not visible here (" + std::to_string(visible) +
            " visible: CUDA_VISIBLE_DEVICES, or a launcher that gives each rank its own GPU only)";
    } else {
      std::string bus;
      try {
        bus = cuda_runtime()->pci_bus_id(p.device);
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (why.empty()) {
        auto s = std::make_unique<NvmlSampler>(p.device, opt_.nvml_period_ms, bus);
        if (s->available()) {
          s->start();
          timeline_->add_source(s.get(), p.rank);
          timeline_ranks_.push_back(p.rank);
          peers_.push_back(std::move(s));
          continue;
        }
        why = s->why_unavailable();
      }
    }
    peers_missing_ += "; rank " + std::to_string(p.rank) + "'s GPU is missing (" + why + ")";
  }
}

EpochMonitor::~EpochMonitor() {
  if (busy_) busy_->stop();
  if (nvml_) nvml_->stop();
  for (auto& p : peers_) p->stop();
  if (timeline_) {
    try {
      timeline_->finish();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loupe: %s\n", e.what());
    }
  }
}

void EpochMonitor::mark(const char* what) {
  if (!timeline_) return;
  timeline_->mark(NvmlSampler::now(), what);
  if (std::string(what) == "epoch_end") timeline_->flush();
}

std::vector<GpuSample> EpochMonitor::gpu_samples_from(size_t first) const {
  return nvml_ ? nvml_->samples_from(first) : std::vector<GpuSample>{};
}

std::string EpochMonitor::timeline_note() const {
  if (!timeline_) return "";
  if (nvml_ && opt_.timeline_peers.empty())
    return timeline_->path() + ": NVML samples every " + std::to_string(opt_.nvml_period_ms) +
           " ms and the run's marks, appended at each epoch's end";
  if (nvml_) {
    // The ranks as a range when there is no gap ("0..3"), else listed.
    std::vector<int> r = timeline_ranks_;
    std::sort(r.begin(), r.end());
    std::string ranks = std::to_string(r.front()) + ".." + std::to_string(r.back());
    if (r.back() - r.front() + 1 != int(r.size()) || r.size() == 1) {
      ranks.clear();
      for (int k : r) ranks += (ranks.empty() ? "" : ", ") + std::to_string(k);
    }
    return timeline_->path() + ": NVML samples of " + std::to_string(r.size()) + " GPU" + (r.size() > 1 ? "s" : "") +
           " (rank" + (r.size() > 1 ? "s " : " ") + ranks + ", rank 0's host; the gpu column is the rank) every " +
           std::to_string(opt_.nvml_period_ms) + " ms and the run's marks, appended at each epoch's end" +
           peers_missing_;
  }
  return timeline_->path() + ": the run's marks only, no GPU samples (" + nvml_why_ + ")";
}

void EpochMonitor::begin_epoch() {
  step_ms_.clear();
  issue_ms_.clear();
  wait_ms_.clear();
  gpu_wait_ms_ = 0;
  flops_ = 0;
  last_step_begin_ = -1;
  if (device_.is_cuda()) cuda_runtime()->reset_peak();
  reset_rss_peak();  // the epoch's own peak, not the run's (where /proc allows: else the run's, still a peak)
  ProcessStats ps = read_process_stats();
  cpu0_ = ps.ok ? ps.cpu_seconds : -1;
  delay0_ = read_delays();
  if (busy_) busy_t0_ = busy_->now_ns();
  t0_ = NvmlSampler::now();
}

// On a GPU, on a thread of its own: a process of loupe on a 64-core host has over a hundred threads
// (OpenBLAS's and OpenMP's pools, CUDA's, NCCL's), slow to read. On the epoch's edge that held each
// rank's first step by amounts that differed between ranks, and the rank that started first waited
// the difference in its first all-reduce (imdb_bilstm on two H200s); read after the first step, it
// starved a short step (mnist_mlp on one GPU). Both in lab/benchmarks.md, "The epoch's edge: the
// ranks start together". A CPU's steps are the host's own work: read there, at the edge itself.
std::future<std::map<int, double>> EpochMonitor::read_delays() const {
  if (device_.is_cuda()) return std::async(std::launch::async, read_thread_run_delays);
  std::promise<std::map<int, double>> now;
  now.set_value(read_thread_run_delays());
  return now.get_future();
}

void EpochMonitor::step_begin() {
  double t = NvmlSampler::now();
  // A step's wall time is the distance between step starts: once the launch queue is full the
  // host is held back to the device's pace, so this is the real per-step time either way.
  if (last_step_begin_ >= 0) step_ms_.push_back((t - last_step_begin_) * 1e3);
  last_step_begin_ = step_t0_ = t;
}

void EpochMonitor::data_ready(double gpu_wait_ms) {
  data_t_ = NvmlSampler::now();
  const double waited = (data_t_ - step_t0_) * 1e3, gpu = std::clamp(gpu_wait_ms, 0.0, waited);
  wait_ms_.push_back(waited - gpu);
  gpu_wait_ms_ += gpu;
}

void EpochMonitor::step_issued(double step_flops) {
  issue_ms_.push_back((NvmlSampler::now() - data_t_) * 1e3);
  flops_ += step_flops;
}

void EpochMonitor::end_train() {
  t_end_ = NvmlSampler::now();
  if (nvml_) nvml_->gpm_mark();  // the epoch's last GPM interval ends here, not up to 0.1 s later
  if (last_step_begin_ >= 0) step_ms_.push_back((t_end_ - last_step_begin_) * 1e3);
  ProcessStats ps = read_process_stats();
  cpu_end_ = ps.ok ? ps.cpu_seconds : -1;
  delay_end_ = read_delays();
  if (busy_) {
    busy_->flush();
    busy_t1_ = busy_->now_ns();
  }
}

// The threads' run delay over the training; -1 where unread. Threads that ended in the epoch (a
// loader's workers) take their delay with them: a lower bound.
double EpochMonitor::waited() {
  if (!delay0_.valid() || !delay_end_.valid()) return -1;
  return run_delay_between(delay0_.get(), delay_end_.get());
}

void EpochMonitor::fill_gpu(EpochReport& r, double t0, double t1) const {
  r.nvml_why = r.gpm_why = nvml_why_;
  if (nvml_) {
    GpuSummary g = nvml_->summarize(t0, t1);
    r.nvml_samples = g.samples;
    if (g.samples == 0) r.nvml_why = "no NVML sample fell inside the window (it was shorter than the sampling period)";
    r.gpu_util_mean = g.gpu_util_mean;
    r.gpu_util_max = g.gpu_util_max;
    r.mem_util_mean = g.mem_util_mean;
    r.mem_used_max_bytes = g.mem_used_max;
    r.mem_total_bytes = g.mem_total;
    r.power_mean_w = g.power_mean_w;
    r.power_max_w = g.power_max_w;
    r.energy_j = g.energy_j;
    r.temp_max_c = g.temp_max_c;
    r.sm_clock_mean_mhz = g.sm_clock_mean_mhz;
    r.throttle = g.throttle;
    r.gpu_sm_active = g.sm_active;
    r.gpu_sm_occupancy = g.sm_occupancy;
    r.gpu_tensor_active = g.tensor_active;
    r.gpu_dram_active = g.dram_active;
    r.gpu_graphics_active = g.graphics_active;
    r.gpm_why = g.gpm_why;
  }
  set_samples_per_joule(r);
}

void EpochMonitor::fill(EpochReport& r) {
  double wall = t_end_ - t0_;
  r.precision = opt_.precision;
  r.step_ms_p50 = percentile(step_ms_, 50);
  r.step_ms_p95 = percentile(step_ms_, 95);
  r.issue_ms_p50 = percentile(issue_ms_, 50);
  r.issue_ms_p95 = percentile(issue_ms_, 95);
  r.data_wait_ms_p50 = percentile(wait_ms_, 50);
  r.data_wait_ms_p95 = percentile(wait_ms_, 95);
  double wait_total = 0;
  for (double w : wait_ms_) wait_total += w;
  if (wall > 0 && !wait_ms_.empty()) {
    r.data_wait_share = wait_total / 1e3 / wall;
    if (device_.is_cuda()) r.data_gpu_wait_share = gpu_wait_ms_ / 1e3 / wall;
  }

  if (device_.is_cuda()) {
    std::string name = cuda_runtime()->device_name();
    if (auto p = datasheet_peak(name, opt_.precision)) {
      r.peak_tflops = p->tflops;
      r.peak_source = p->source;
    } else {
      r.peak_source = "no datasheet entry for " + name + " (run loupe peak)";
    }
    // The pool's peak and the CUDA graphs' own allocations (two peaks added: an upper bound).
    r.alloc_peak_bytes = double(cuda_runtime()->peak_bytes_in_use() + cuda_runtime()->graph_peak_bytes());
  } else {
    r.peak_source = "no peak table for CPUs";
  }

  fill_gpu(r, t0_, t_end_);
  r.busy_why = busy_why_;
  if (busy_ && busy_t1_ > busy_t0_) fill_busy(r);
  if (cpu0_ >= 0 && cpu_end_ >= 0 && wall > 0) r.host_cpu_util = (cpu_end_ - cpu0_) / wall;
  // Of the time its threads were ready to run, the share they waited for a core.
  const double waited = this->waited();
  if (cpu0_ >= 0 && cpu_end_ >= 0 && waited >= 0) r.host_cpu_wait_share = cpu_wait_share(cpu_end_ - cpu0_, waited);
  // The RSS is the epoch's peak, read here, after the evaluation that fill() follows: read at the
  // end of training it was the RSS then (446 MiB where evaluation's peak was 1.21 GiB).
  const ProcessStats ps = read_process_stats();
  if (ps.ok) {
    const double peak = ps.rss_peak_bytes >= ps.rss_bytes ? ps.rss_peak_bytes : ps.rss_bytes;  // NaN: the RSS now
    if (peak > 0) r.host_rss_bytes = peak;
  }
  derive_figures(r, flops_, wall, opt_.price_per_hour);
}

// The GPU's time split into busy, boundaries and idle (instrument/intervals.h), and its kernels per
// step, from the window's activity records.
void EpochMonitor::fill_busy(EpochReport& r) {
  const std::vector<ActivityRecord> recs = busy_->records(busy_t0_, busy_t1_);
  std::vector<Interval> all;
  all.reserve(recs.size());
  int64_t kernels = 0;
  for (const ActivityRecord& a : recs) {
    all.push_back({a.begin_ns, a.end_ns});
    kernels += a.kind == 0 && a.begin_ns >= busy_t0_;  // one that began before the window is the last epoch's
  }
  const TimeSplit s = split_time(std::move(all), busy_t0_, busy_t1_, kBoundaryMaxNs);
  const double window = double(busy_t1_ - busy_t0_);
  r.gpu_busy_share = double(s.busy) / window;
  r.gpu_boundary_share = double(s.boundary) / window;
  if (r.steps > 0) r.gpu_kernels_per_step = double(kernels) / double(r.steps);
  if (opt_.nccl) fill_nccl(r, recs, s.busy);
  busy_->discard_before(busy_t1_);
}

// The all-reduce's work: NCCL's kernels.
static bool all_reduce_work(const ActivityRecord& a) { return a.kind == 0 && a.name.rfind("nccl", 0) == 0; }

// The all-reduce's work against the rest, from the window's records (fetched once, by fill_busy):
// the time it ran, and the time only it ran (the busy time less the union of everything else).
void EpochMonitor::fill_nccl(EpochReport& r, const std::vector<ActivityRecord>& recs, uint64_t busy) {
  std::vector<Interval> nccl, other;
  for (const ActivityRecord& a : recs)
    (all_reduce_work(a) ? nccl : other).push_back({a.begin_ns, a.end_ns});
  const double window = double(busy_t1_ - busy_t0_);
  const uint64_t in_nccl = union_length(nccl, busy_t0_, busy_t1_);
  r.nccl_share = double(in_nccl) / window;
  r.nccl_exposed_share = double(busy - union_length(other, busy_t0_, busy_t1_)) / window;
}

}  // namespace loupe::instrument
