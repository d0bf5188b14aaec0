// The op table's perf mode (after ggml's test-backend-ops -m perf): every case of op_cases.h at
// its perf shape, forward pass, on the CPU and, where loupe was built with CUDA and a GPU is
// present, on the GPU; per op, device and dtype: microseconds per call, GB/s (the case's bytes:
// every input read once and the output written once unless it says otherwise) and GFLOP/s (its
// analytic FLOP count). Each FLOP count is also checked against the library's for one call.
// --backward times the forward and the backward pass together (GFLOP/s of both; no GB/s).
//
//   ops_perf [--filter SUBSTRING] [--device cpu|cuda|all] [--dtype f32,f16,bf16,f64]
//            [--min-time SECONDS] [--backward] [--quick]
//
// Timing: warm-up calls, then batches of calls (doubling) until a batch takes --min-time (default
// 0.2 s); on the GPU the stream is synchronised before the clock starts and before it stops, so a
// call's time includes its launches. --quick runs the test's small shapes once each (the CTest
// smoke test ops_perf_quick); it checks the FLOP counts too. Exit status 1 if a count differs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/flops.h"
#include "op_cases.h"

using namespace loupe;

namespace {

struct Options {
  std::string filter;
  std::vector<Device> devices{kCPU, kCUDA};
  std::vector<DType> dtypes;  // empty: f32 on the CPU; f32, f16 and bf16 on CUDA
  double min_time = 0.2;
  bool quick = false;
  bool backward = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "%s\nusage: ops_perf [--filter SUBSTRING] [--device cpu|cuda|all] [--dtype f32,f16,bf16,f64]\n"
               "                [--min-time SECONDS] [--backward] [--quick]\n",
               why);
  std::exit(2);
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  usage(("--dtype: unknown dtype '" + s + "' (f32, f16, bf16 or f64)").c_str());
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--filter") o.filter = value();
    else if (a == "--device") {
      std::string d = value();
      if (d == "cpu") o.devices = {kCPU};
      else if (d == "cuda") o.devices = {kCUDA};
      else if (d == "all") o.devices = {kCPU, kCUDA};
      else usage("--device: cpu, cuda or all");
    } else if (a == "--dtype") {
      std::stringstream ss(value());
      for (std::string t; std::getline(ss, t, ',');) o.dtypes.push_back(parse_dtype(t));
    } else if (a == "--min-time") {
      o.min_time = std::atof(value().c_str());
      if (!(o.min_time > 0)) usage("--min-time: a positive number of seconds");
    } else if (a == "--quick") o.quick = true;
    else if (a == "--backward") o.backward = true;
    else if (a == "--help" || a == "-h") usage("ops_perf: time every op of the table (tests/op_cases.h)");
    else usage(("unknown option " + a).c_str());
  }
  return o;
}

std::string shapes_str(const test::OpCase& c) {
  std::string s;
  for (const test::InputSpec& i : c.inputs) {
    if (!s.empty()) s += ",";
    std::string d;
    for (int64_t v : i.shape) d += (d.empty() ? "" : "x") + std::to_string(v);
    s += d.empty() ? "scalar" : d;
  }
  return s;
}

// The case's inputs on device d, floats in dt (those marked keep_f32 stay float32); with `grad`,
// those that take a gradient in the tests take one here.
std::vector<Tensor> inputs_on(const test::OpCase& c, Device d, DType dt, bool grad) {
  std::vector<Tensor> xs = test::make_inputs(c, DType::f32, 11), on;
  for (size_t k = 0; k < xs.size(); ++k) {
    Tensor t = to(xs[k].detach(), d);
    if (is_floating(t.dtype()) && !c.inputs[k].keep_f32) t = to(t, dt);
    t = t.detach();
    if (grad && xs[k].requires_grad()) t.requires_grad_(true);
    on.push_back(t);
  }
  return on;
}

// One call: the forward pass, or with `seed` the forward and the backward pass from it.
Tensor call(const test::OpCase& c, std::vector<Tensor>& xs, const Tensor& seed) {
  Tensor out = c.f(xs);
  if (seed.defined()) {
    backward(out, seed);
    for (Tensor& x : xs) x.set_grad(Tensor());
  }
  return out;
}

void sync(Device d) {
  if (d.is_cuda()) cuda_runtime()->synchronize();
}

// Why case c does not run on d in dt ("" when it does).
std::string not_run(const test::OpCase& c, Device d, DType dt) {
  if (dt == DType::f16 || dt == DType::bf16) {
    if (!d.is_cuda()) return "16-bit ops run on CUDA only";
    if (!(dt == DType::f16 ? c.tol.f16 : c.tol.bf16)) return "runs in float32 in mixed precision";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::unique_ptr<NoGradGuard> no_grad;  // forward only: nothing recorded for a backward pass
  if (!o.backward) no_grad = std::make_unique<NoGradGuard>();
  std::printf("ops_perf: %s shapes, %s; CPU: %u hardware threads", o.quick ? "the tests' small" : "perf",
              o.backward ? "forward and backward" : "forward pass", std::thread::hardware_concurrency());
  const bool have_cuda = cuda_available();
  if (have_cuda) std::printf("; GPU: %s", cuda_runtime()->device_name().c_str());
  std::printf("\n%-38s %-6s %-8s %-28s %11s %9s %9s\n", "op", "device", "dtype", "shape", "us/call", "GB/s", "GFLOP/s");
  int mismatches = 0, runs = 0, devices_run = 0;
  for (Device d : o.devices) {
    if (d.is_cuda() && !have_cuda) {
      std::printf("cuda: skipped (no CUDA device, or a CPU-only build)\n");
      continue;
    }
    ++devices_run;
    std::vector<DType> dtypes = o.dtypes;
    if (dtypes.empty()) dtypes = d.is_cuda() ? std::vector<DType>{DType::f32, DType::f16, DType::bf16} : std::vector<DType>{DType::f32};
    for (const test::OpCase& base : test::op_cases()) {
      if (!o.filter.empty() && base.name.find(o.filter) == std::string::npos) continue;
      const test::OpCase c = o.quick ? base : base.at_perf_shape();
      for (DType dt : dtypes) {
        if (!not_run(c, d, dt).empty()) continue;
        std::vector<Tensor> xs = inputs_on(c, d, dt, o.backward);
        // Warm-up, and one call's FLOPs as the library counts them.
        Tensor seed;
        if (o.backward) {
          NoGradGuard g;
          Tensor y = c.f(xs);
          seed = ones(y.shape(), y.dtype(), y.device());
        }
        const double f0 = flops_counted();
        Tensor out = call(c, xs, seed);
        sync(d);
        const double counted = flops_counted() - f0;
        const test::Flops want = c.flops(c.shapes());
        const double flops = want.forward + (o.backward ? want.backward : 0);
        if (counted != flops) {
          ++mismatches;
          std::fprintf(stderr, "ops_perf: %s on %s: the library counts %.0f FLOPs, op_cases.h expects %.0f\n",
                       c.name.c_str(), d.str().c_str(), counted, flops);
        }
        if (!o.quick) (void)call(c, xs, seed);
        const double bytes = test::op_bytes(c, out.shape(), double(dtype_size(out.dtype())));
        out = Tensor();
        // Batches of calls, doubling, until one takes min_time (one call in quick mode).
        int64_t calls = 1;
        double seconds = 0;
        for (;;) {
          sync(d);
          auto t0 = std::chrono::steady_clock::now();
          for (int64_t k = 0; k < calls; ++k) (void)call(c, xs, seed);
          sync(d);
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (o.quick || seconds >= o.min_time || calls >= (int64_t(1) << 24)) break;
          calls = seconds > 0 ? std::max(calls * 2, int64_t(double(calls) * o.min_time / seconds * 1.1)) : calls * 2;
        }
        const double per = seconds / double(calls);
        char gbs[32] = "n/a";  // bytes are counted for the forward pass only
        if (!o.backward) std::snprintf(gbs, sizeof gbs, "%.2f", bytes / per * 1e-9);
        std::printf("%-38s %-6s %-8s %-28s %11.2f %9s %9.2f\n", c.name.c_str(), d.is_cuda() ? "cuda" : "cpu",
                    dtype_name(dt), shapes_str(c).c_str(), per * 1e6, gbs, flops / per * 1e-9);
        std::fflush(stdout);
        ++runs;
      }
    }
  }
  if (runs == 0 && devices_run > 0) std::printf("no case matched --filter '%s' on these devices and dtypes\n", o.filter.c_str());
  if (mismatches) {
    std::fprintf(stderr, "ops_perf: %d FLOP count(s) differ from op_cases.h\n", mismatches);
    return 1;
  }
  return 0;
}
