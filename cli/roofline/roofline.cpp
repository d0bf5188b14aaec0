#include "cli/roofline/roofline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include <unistd.h>

#include "core/error.h"
#include "core/philox.h"
#include "instrument/host_stats.h"
#include "core/thread_pool.h"
#include "instrument/peak.h"
#include "ops/backend/gemm_cpu.h"

namespace loupe::cli {

namespace {

GpuRooflineFn g_gpu = nullptr;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds per call of f: one warm-up, then repetitions for at least min_seconds; the median.
double time_host(const std::function<void()>& f, double min_seconds) {
  f();
  std::vector<double> t;
  double start = now();
  do {
    double t0 = now();
    f();
    t.push_back(now() - t0);
  } while (now() - start < min_seconds || t.size() < 3);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One row's dot product with eight independent partial sums (vectorisable without -ffast-math).
float dot(const float* a, const float* x, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[j + k] * x[j + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; j < n; ++j) r += a[j] * x[j];
  return r;
}

void gemv_rows(const float* A, const float* x, float* y, int64_t n, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) y[i] = dot(A + i * n, x, n);
}

// OR of every 8-byte word in [a, a + words) with eight accumulators and a software prefetch 2 KiB
// ahead: a pure load stream. The float dot product it replaces was bound by its add latency at
// SSE width (9 GB/s a core where the loads alone run at 11-13) and OpenBLAS's sgemv passed it.
uint64_t or_words(const uint64_t* a, int64_t words) {
  uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= words; j += 8) {
    __builtin_prefetch(a + j + 256);
    for (int k = 0; k < 8; ++k) s[k] |= a[j + k];
  }
  uint64_t r = (s[0] | s[1]) | (s[2] | s[3]) | (s[4] | s[5]) | (s[6] | s[7]);
  for (; j < words; ++j) r |= a[j];
  return r;
}

// Host read bandwidth with every thread (bytes per second): a load stream over twice the
// last-level cache (at least 512 MiB, at most 2 GiB), so that it comes from memory. A read stream
// is the CPU's roof for y = A x; a memcpy measured less than the GEMV itself reads (its stores
// cost reads too).
double host_read_bandwidth(double min_seconds) {
  const double llc = double(instrument::last_level_cache_bytes());
  const int64_t bytes = int64_t(std::clamp(2 * llc, 512.0 * (1 << 20), 2048.0 * (1 << 20)));
  const int64_t words = bytes / 8;
  std::vector<uint64_t> a(static_cast<size_t>(words), 1);
  std::vector<uint64_t> part(static_cast<size_t>(num_threads()) * 16);
  volatile uint64_t sink = 0;
  double s = time_host(
      [&] {
        std::atomic<int> slot{0};
        parallel_for(0, words, 1 << 21, [&](int64_t s0, int64_t s1) {
          part[size_t(slot++ % int(part.size()))] = or_words(a.data() + s0, s1 - s0);
        });
        sink = part[0];
      },
      min_seconds);
  (void)sink;
  return double(words) * 8.0 / s;
}

double max_rel_error(const std::vector<float>& y, const std::vector<double>& ref) {
  double scale = 0, err = 0;
  for (double v : ref) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < y.size(); ++i) err = std::max(err, std::abs(double(y[i]) - ref[i]));
  return scale > 0 ? err / scale : err;
}

}  // namespace

void register_gpu_roofline(GpuRooflineFn f) { g_gpu = f; }

std::vector<GemvRow> run_roofline(const RooflineOptions& o) {
  for (int64_t n : o.sizes) LOUPE_CHECK(n >= 1 && n <= 65536, "roofline sizes must be in [1, 65536], got ", n);
  std::optional<GpuRoofline> gpu;
  if (o.gpu && g_gpu) gpu = g_gpu();
  LOUPE_CHECK(!o.gpu || o.cpu || gpu, "loupe roofline: no GPU here (a CPU-only build, or no device)");
  double gpu_bw = 0, gpu_peak = 0;
  if (gpu) {
    gpu_bw = gpu->copy_bandwidth();
    std::string why;
    if (auto m = instrument::measure_gpu_peak(&why)) gpu_peak = m->fma_tflops * 1e3;
  }
  double cpu_bw = o.cpu ? host_read_bandwidth(o.min_seconds) : 0;
  const std::string cpu_name = "CPU (" + std::to_string(num_threads()) + " threads)";
  const double llc = double(instrument::last_level_cache_bytes());
  std::vector<GemvRow> rows;
  for (int64_t n : o.sizes) {
    // The same random A and x for every implementation; the reference in float64.
    std::vector<float> A(static_cast<size_t>(n * n)), x(static_cast<size_t>(n));
    parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < n; ++j) A[size_t(i * n + j)] = philox_uniform(7, 0, uint64_t(i * n + j)) - 0.5f;
    });
    for (int64_t j = 0; j < n; ++j) x[size_t(j)] = philox_uniform(8, 0, uint64_t(j)) - 0.5f;
    std::vector<double> ref(static_cast<size_t>(n));
    parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        double s = 0;
        for (int64_t j = 0; j < n; ++j) s += double(A[size_t(i * n + j)]) * double(x[size_t(j)]);
        ref[size_t(i)] = s;
      }
    });
    const double flops = 2.0 * double(n) * double(n), bytes = 4.0 * double(n) * double(n) + 8.0 * double(n);
    auto add = [&](const std::string& dev, const std::string& impl, double sec, const std::vector<float>& y, double bw,
                   std::optional<double> peak) {
      GemvRow r;
      r.device_name = dev;
      r.impl = impl;
      r.n = n;
      r.seconds = sec;
      r.gflops = flops / sec / 1e9;
      r.bytes_per_s = bytes / sec;
      r.bandwidth_bytes_per_s = bw;
      r.roofline_fraction = r.bytes_per_s / bw;
      r.in_cache = dev == cpu_name && llc > 0 && 4.0 * double(n) * double(n) <= llc;
      r.peak_gflops = peak;
      r.max_rel_error = max_rel_error(y, ref);
      rows.push_back(r);
    };
    if (gpu) {
      for (const GpuGemvResult& g : gpu->run(n, A.data(), x.data(), o.min_seconds))
        add(gpu->device_name, g.impl, g.seconds, g.y, gpu_bw, gpu_peak > 0 ? std::optional<double>(gpu_peak) : std::nullopt);
    }
    if (o.cpu) {
      std::vector<float> y(static_cast<size_t>(n));
      double s1 = time_host([&] { gemv_rows(A.data(), x.data(), y.data(), n, 0, n); }, o.min_seconds);
      add(cpu_name, "cpu_1thread", s1, y, cpu_bw, std::nullopt);
      std::fill(y.begin(), y.end(), 0.f);
      double st = time_host(
          [&] { parallel_for(0, n, 16, [&](int64_t r0, int64_t r1) { gemv_rows(A.data(), x.data(), y.data(), n, r0, r1); }); },
          o.min_seconds);
      add(cpu_name, "cpu_threads", st, y, cpu_bw, std::nullopt);
      std::fill(y.begin(), y.end(), 0.f);
      // The BLAS one row block per thread (loupe runs OpenBLAS single-threaded; see gemm_blas.cpp).
      if (cpu::blas_sgemv(1, n, A.data(), x.data(), y.data())) {
        double sb = time_host(
            [&] {
              parallel_for(0, n, 16, [&](int64_t r0, int64_t r1) {
                cpu::blas_sgemv(r1 - r0, n, A.data() + r0 * n, x.data(), y.data() + r0);
              });
            },
            o.min_seconds);
        add(cpu_name, "cpu_blas", sb, y, cpu_bw, std::nullopt);
      }
    }
  }
  return rows;
}

}  // namespace loupe::cli
