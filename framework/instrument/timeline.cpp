#include "instrument/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/file_check.h"

namespace loupe::instrument {
namespace {

// printf-formatted, or an empty cell for a figure NVML did not report (NaN).
std::string cell(const char* f, double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string seconds(double t, double t0) { return cell("%.3f", t - t0); }

}  // namespace

std::string timeline_header() {
  return "t_s,gpu,util_pct,mem_used_mib,power_w,temp_c,sm_clock_mhz,sm_active_pct,sm_occupancy_pct,"
         "tensor_active_pct,dram_active_pct,mark";
}

std::string timeline_sample_row(const GpuSample& s, double t0, int gpu) {
  std::string gpm = ",,,";
  if (s.gpm)
    gpm = cell("%.1f", s.gpm->sm_active) + "," + cell("%.1f", s.gpm->sm_occupancy) + "," +
          cell("%.1f", s.gpm->tensor_active) + "," + cell("%.1f", s.gpm->dram_active);
  return seconds(s.t, t0) + "," + std::to_string(gpu) + "," + cell("%.0f", s.gpu_util) + "," +
         cell("%.1f", s.mem_used / (1024.0 * 1024.0)) + "," +
         (s.has_power ? cell("%.3f", s.power_w) : std::string()) + "," + cell("%.0f", s.temp_c) + "," +
         cell("%.0f", s.sm_clock_mhz) + "," + gpm + ",";
}

std::string timeline_mark_row(double t, double t0, const std::string& mark) {
  return seconds(t, t0) + ",,,,,,,,,,," + mark;
}

TimelineWriter::TimelineWriter(const std::string& path, double t0, int gpu, const NvmlSampler* sampler)
    : path_((require_regular_output(path, "--timeline file"), path)), t0_(t0), gpu_(gpu),
      f_(std::fopen(path.c_str(), "w"), &std::fclose) {
  if (!f_)
    throw Error("cannot open '" + path + "' for writing (--timeline): " + std::strerror(errno) +
                "; check that its directory exists and is writable");
  add_source(sampler, gpu);
  put(timeline_header());
  std::fflush(f_.get());
}

void TimelineWriter::add_source(const NvmlSampler* sampler, int gpu) {
  if (sampler) sources_.push_back({sampler, gpu});
}

void TimelineWriter::put(const std::string& line) {
  if (std::fputs((line + "\n").c_str(), f_.get()) < 0) {
    failed_ = true;
    throw Error("cannot write to '" + path_ + "' (--timeline): " + std::strerror(errno));
  }
}

void TimelineWriter::mark(double t, const std::string& what) {
  marks_.emplace_back(t, what);
  if (sources_.empty()) write_until(std::numeric_limits<double>::infinity());
}

// The sources' new samples, merged by time (ties by gpu), up to the time every source has reached
// (or t_limit), each preceded by the marks at or before it; then the marks up to that time.
void TimelineWriter::write_until(double t_limit) {
  if (failed_) return;
  const size_t before = pending_.size();
  for (Source& src : sources_) {
    const std::vector<GpuSample> fresh = src.sampler->samples_from(src.next);
    src.next += fresh.size();
    if (!fresh.empty()) src.latest = std::max(src.latest, fresh.back().t);
    for (const GpuSample& s : fresh) pending_.push_back({s, src.gpu});
  }
  if (pending_.size() > before)
    std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
      return a.s.t < b.s.t || (a.s.t == b.s.t && a.gpu < b.gpu);
    });
  // A source's later samples come after its latest (each stamps its samples in order), so every
  // row up to the slowest source's latest sample is final.
  double safe = std::numeric_limits<double>::infinity();
  for (const Source& src : sources_) safe = std::min(safe, src.latest);
  safe = std::max(safe, t_limit);
  size_t i = 0, m = 0;
  for (; i < pending_.size() && pending_[i].s.t <= safe; ++i) {
    for (; m < marks_.size() && marks_[m].first <= pending_[i].s.t; ++m)
      put(timeline_mark_row(marks_[m].first, t0_, marks_[m].second));
    put(timeline_sample_row(pending_[i].s, t0_, pending_[i].gpu));
  }
  for (; m < marks_.size() && marks_[m].first <= safe; ++m) put(timeline_mark_row(marks_[m].first, t0_, marks_[m].second));
  pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(i));
  marks_.erase(marks_.begin(), marks_.begin() + std::ptrdiff_t(m));
  if (std::fflush(f_.get()) != 0) {
    failed_ = true;
    throw Error("cannot write to '" + path_ + "' (--timeline): " + std::strerror(errno));
  }
}

void TimelineWriter::flush() { write_until(-std::numeric_limits<double>::infinity()); }

void TimelineWriter::finish() { write_until(std::numeric_limits<double>::infinity()); }

}  // namespace loupe::instrument
