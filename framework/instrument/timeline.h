// The GPU timeline (--timeline FILE.csv): NVML's samples as they were taken, one row each, with
// the run's marks (epoch_start, eval_start, eval_end, checkpoint, epoch_end) between them, in time
// order. The file is written as the run goes (flush() at each epoch's end), so a long or killed run
// keeps what it sampled. Several samplers may feed one file (--gpus N: every GPU of rank 0's host),
// each with its own `gpu` value; their rows are merged by time. Format (docs/profiling.md, "GPU timelines"):
//   t_s,gpu,util_pct,mem_used_mib,power_w,temp_c,sm_clock_mhz,sm_active_pct,sm_occupancy_pct,
//   tensor_active_pct,dram_active_pct,mark
// t_s: seconds since the run's start (3 decimals); a figure NVML did not report is an empty cell,
// never 0 (docs/design.md principle 5); a mark row has t_s and mark only. The GPM columns are the
// interval (about 0.1 s) that ended at the row's sample, on the rows where one did.
#pragma once
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "instrument/nvml_sampler.h"

namespace loupe::instrument {

std::string timeline_header();
// One sample's row; t0 is the run's start on NvmlSampler::now()'s clock.
std::string timeline_sample_row(const GpuSample& s, double t0, int gpu);
std::string timeline_mark_row(double t, double t0, const std::string& mark);

class TimelineWriter {
 public:
  // Creates (truncates) path and writes the header; throws loupe::Error naming the path when it
  // cannot. `sampler` may be null (no NVML: the file then holds the marks only); its rows say `gpu`.
  TimelineWriter(const std::string& path, double t0, int gpu, const NvmlSampler* sampler = nullptr);
  // The constructor's source, given later (null: none). Before the first mark.
  void attach(const NvmlSampler* sampler) { add_source(sampler, gpu_); }
  // One more sampler, whose rows say `gpu` (null: ignored). Before the first mark.
  void add_source(const NvmlSampler* sampler, int gpu);

  // A mark at time t (NvmlSampler::now()). It is written once every source has a sample at or
  // after t, so the rows stay in time order (a sampler's thread stamps a sample before it reads
  // NVML); without a sampler, and at finish(), at once.
  void mark(double t, const std::string& what);
  // Appends the samples taken since the last flush, up to the time every source has reached, and
  // the marks they have passed; flushes the file.
  void flush();
  // The last flush: every sample and every mark left (call after the samplers have stopped).
  void finish();
  const std::string& path() const { return path_; }

 private:
  struct Source {
    const NvmlSampler* sampler;
    int gpu;
    size_t next = 0;       // its samples[0, next) have been taken into pending_ (or written)
    double latest = -std::numeric_limits<double>::infinity();  // its last sample's time: none will come before it
  };
  struct Pending {
    GpuSample s;
    int gpu;
  };
  void write_until(double t_limit);
  void put(const std::string& line);

  std::string path_;
  double t0_;
  int gpu_;
  std::vector<Source> sources_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
  // Samples taken from the sources but not yet written, in time order: a source that sampled
  // later than another may still add rows that go before them.
  std::vector<Pending> pending_;
  std::vector<std::pair<double, std::string>> marks_;  // waiting, in the order given
  bool failed_ = false;  // a write failed and was reported: the rest is dropped, not reported again
};

}  // namespace loupe::instrument
