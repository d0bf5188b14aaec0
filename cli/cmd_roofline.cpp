// loupe roofline: the matrix-vector roofline study (cli/roofline/), as a table, a CSV and a plot.
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "instrument/peak.h"
#include "cli/commands.h"
#include "cli/roofline/roofline.h"
#include "instrument/host_stats.h"

namespace loupe::cli {

namespace {
// The devices' yardsticks, once each.
void print_yardsticks(const std::vector<cli::GemvRow>& rows) {
  std::vector<std::string> seen;
  for (const auto& r : rows) {
    if (std::find(seen.begin(), seen.end(), r.device_name) != seen.end()) continue;
    seen.push_back(r.device_name);
    if (r.peak_gflops || r.impl.rfind("cpu", 0) != 0)
      std::printf("%s: copy bandwidth %.0f GB/s (read + write)", r.device_name.c_str(), r.bandwidth_bytes_per_s / 1e9);
    else
      std::printf("%s: read bandwidth %.0f GB/s (a load stream past the last-level cache)", r.device_name.c_str(),
                  r.bandwidth_bytes_per_s / 1e9);
    if (r.peak_gflops) {
      std::printf(", fp32 peak %.1f TFLOP/s (FMA loop)", *r.peak_gflops / 1e3);
      if (auto sheet = instrument::datasheet_peak(r.device_name, Precision::FP32))
        std::printf("; %s %.1f TFLOP/s", sheet->source.c_str(), sheet->tflops);
    }
    std::printf("\n");
  }
}

// One line per implementation and size; a CPU row whose A fits in the last-level cache is marked,
// its rate being the cache's and not the memory's the roof stands for.
void print_table(const std::vector<cli::GemvRow>& rows) {
  std::printf("%-13s %6s %10s %9s %10s %9s %10s\n", "impl", "n", "GFLOP/s", "GB/s", "roofline", "of peak",
              "rel error");
  bool marked = false, past = false;
  for (const auto& r : rows) {
    marked = marked || r.in_cache;
    past = past || (!r.in_cache && r.roofline_fraction > 1 && r.impl.rfind("cpu", 0) == 0);
    std::printf("%-13s %6lld %10.1f %9.1f %8.1f%%%s %9s %10.1e\n", r.impl.c_str(), (long long)r.n, r.gflops,
                r.bytes_per_s / 1e9, 100 * r.roofline_fraction, r.in_cache ? "*" : " ",
                r.peak_gflops ? (std::to_string(int(std::round(1000 * r.gflops / *r.peak_gflops)) / 10.0).substr(0, 4) + "%").c_str()
                              : "n/a",
                r.max_rel_error);
  }
  if (marked)
    std::printf("* A (4n^2 bytes) fits in the CPU's %.0f MiB last-level cache: read from there, not from memory, "
                "so it may pass 100 %% of the memory roof\n",
                double(instrument::last_level_cache_bytes()) / (1 << 20));
  // OpenBLAS's sgemv (AVX-512 loads, its own prefetching) out-streamed the load stream by about 15 %.
  if (past)
    std::printf("a CPU row above 100 %% out of cache read faster than the load stream the roof is (wider loads, "
                "deeper prefetching): the roof is a measured stream, not the memory's limit\n");
}

void write_roofline_csv(const std::vector<cli::GemvRow>& rows, const std::string& csv) {
  FILE* f = std::fopen(csv.c_str(), "w");
  if (!f) throw Error("cannot write '" + csv + "': " + std::strerror(errno));
  std::fprintf(f, "device_name,impl,n,seconds,gflops,bytes_per_s,roofline_fraction,bandwidth_bytes_per_s,peak_gflops,"
                  "max_rel_error\n");
  for (const auto& r : rows) {
    std::fprintf(f, "%s,%s,%lld,%.9g,%.9g,%.9g,%.9g,%.9g,", r.device_name.c_str(), r.impl.c_str(), (long long)r.n,
                 r.seconds, r.gflops, r.bytes_per_s, r.roofline_fraction, r.bandwidth_bytes_per_s);
    if (r.peak_gflops) std::fprintf(f, "%.9g", *r.peak_gflops);
    std::fprintf(f, ",%.3g\n", r.max_rel_error);
  }
  // A full disk shows at the flush: said, not a table cut short in silence.
  const bool wrote = std::fflush(f) == 0 && !std::ferror(f);
  const int err = errno;
  if (std::fclose(f) != 0 || !wrote) throw Error("cannot write '" + csv + "': " + std::strerror(wrote ? errno : err));
}
}  // namespace

int cmd_roofline(const Options& o) {
  cli::RooflineOptions ro;
  if (o.has("sizes")) ro.sizes = o.sizes;
  ro.min_seconds = o.min_seconds.value_or(ro.min_seconds);
  ro.gpu = o.device.empty() ? cuda_available() : pick_device(o).is_cuda();
  auto rows = cli::run_roofline(ro);
  print_yardsticks(rows);
  print_table(rows);
  std::string csv = output_path(o, "csv"), png = output_path(o, "png");
  write_roofline_csv(rows, csv);
  std::printf("table in %s\n", csv.c_str());
  return plot("plot_roofline.py", csv, png);
}

}  // namespace loupe::cli
