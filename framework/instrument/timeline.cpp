#include "instrument/timeline.h"

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

std::string timeline_header() { return "t_s,gpu,util_pct,mem_used_mib,power_w,temp_c,sm_clock_mhz,mark"; }

std::string timeline_sample_row(const GpuSample& s, double t0, int gpu) {
  return seconds(s.t, t0) + "," + std::to_string(gpu) + "," + cell("%.0f", s.gpu_util) + "," +
         cell("%.1f", s.mem_used / (1024.0 * 1024.0)) + "," +
         (s.has_power ? cell("%.3f", s.power_w) : std::string()) + "," + cell("%.0f", s.temp_c) + "," +
         cell("%.0f", s.sm_clock_mhz) + ",";
}

std::string timeline_mark_row(double t, double t0, const std::string& mark) {
  return seconds(t, t0) + ",,,,,,," + mark;
}

TimelineWriter::TimelineWriter(const std::string& path, double t0, int gpu, const NvmlSampler* sampler)
    : path_((require_regular_output(path, "--timeline file"), path)), t0_(t0), gpu_(gpu), sampler_(sampler),
      f_(std::fopen(path.c_str(), "w"), &std::fclose) {
  if (!f_)
    throw Error("cannot open '" + path + "' for writing (--timeline): " + std::strerror(errno) +
                "; check that its directory exists and is writable");
  put(timeline_header());
  std::fflush(f_.get());
}

void TimelineWriter::put(const std::string& line) {
  if (std::fputs((line + "\n").c_str(), f_.get()) < 0)
    throw Error("cannot write to '" + path_ + "' (--timeline): " + std::strerror(errno));
}

void TimelineWriter::mark(double t, const std::string& what) {
  marks_.emplace_back(t, what);
  if (!sampler_) write_until(std::numeric_limits<double>::infinity());
}

// The new samples, each preceded by the marks at or before it; then the marks up to t_limit.
void TimelineWriter::write_until(double t_limit) {
  std::vector<GpuSample> fresh = sampler_ ? sampler_->samples_from(next_sample_) : std::vector<GpuSample>{};
  next_sample_ += fresh.size();
  size_t m = 0;
  for (const GpuSample& s : fresh) {
    for (; m < marks_.size() && marks_[m].first <= s.t; ++m) put(timeline_mark_row(marks_[m].first, t0_, marks_[m].second));
    put(timeline_sample_row(s, t0_, gpu_));
  }
  const double last = fresh.empty() ? -std::numeric_limits<double>::infinity() : fresh.back().t;
  for (; m < marks_.size() && (marks_[m].first <= last || marks_[m].first <= t_limit); ++m)
    put(timeline_mark_row(marks_[m].first, t0_, marks_[m].second));
  marks_.erase(marks_.begin(), marks_.begin() + std::ptrdiff_t(m));
  if (std::fflush(f_.get()) != 0) throw Error("cannot write to '" + path_ + "' (--timeline): " + std::strerror(errno));
}

void TimelineWriter::flush() { write_until(-std::numeric_limits<double>::infinity()); }

void TimelineWriter::finish() { write_until(std::numeric_limits<double>::infinity()); }

}  // namespace loupe::instrument
