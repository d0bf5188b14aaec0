// The `loupe` command: train, eval and list the reference models.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/nvtx.h"
#include "core/philox.h"
#include "core/precision.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "data/idx.h"
#include "instrument/advice.h"
#include "instrument/busy_tracker.h"
#include "instrument/chrome_trace.h"
#include "instrument/monitor.h"
#include "instrument/peak.h"
#include "instrument/report_io.h"
#include "loader/loader.h"
#include "models/registry.h"
#include "ops/gemm_cpu.h"
#include "ops/view.h"
#include "tools/bench.h"
#include "tools/cli_numbers.h"
#include "tools/datasets.h"
#include "tools/interrupt.h"
#include "tools/roofline/roofline.h"
#include "train/checkpoint.h"
#include "train/checkpoint_file.h"
#include "train/trainer.h"

using namespace loupe;

namespace {

const char* kUsage = R"(loupe: train deep networks on the CPU and NVIDIA GPUs, and see how well the GPU was used.

usage:
  loupe train MODEL [options]     train a reference model (defaults from its recipe)
  loupe eval MODEL --checkpoint PATH [--data DIR] [--device D]
                                  test accuracy of a saved model
  loupe generate char_lstm --checkpoint PATH [--prompt TEXT] [--length 400] [--temperature 0.5]
                [--data FILE] [--seed N]  sample text from a trained char_lstm (its corpus, --data,
                                  gives the characters; no prompt: a random 40-character window)
  loupe bench [MODEL,MODEL...] [--batch LIST] [--precision LIST] [--steps N] [--min-seconds S]
              [--rounds R] [--graph auto|on|off] [--json F] [--csv F]
                                  time training steps per (model, batch, precision): samples/s,
                                  ms/step, GPU busy and utilisation, MFU, memory, power, samples/J;
                                  at least N steps (100) and S seconds (GPU 2, CPU 0) each; R rounds
                                  in turn, the fastest kept (the host's speed drifts)
  loupe sweep MODEL --batch 32,128,512,2048 [--precision fp32,fp16] [--csv F] [--png F]
                                  the same table for one model, written as CSV and plotted (PNG)
  loupe models                    list the models and their recipes
  loupe peak [--device cuda]      measure the GPU's fp32 peak (FMA loop, SGEMM) beside its datasheet
  loupe roofline [--sizes 1024,2048,4096,8192,16384] [--device cpu] [--csv F] [--png F]
                                  the matrix-vector roofline study: y = A x by cuBLAS sgemv, a naive
                                  kernel, ours, and the CPU (one thread, all threads, the BLAS), in
                                  GFLOP/s and as a fraction of the measured copy bandwidth; plotted
  loupe copybench [--batch N]     host-to-device bandwidth from pinned and pageable memory, for one
                                  loader slot of mnist_mlp's batch (default 128) and for 64 MiB
  loupe --help | loupe train --help

Run `loupe train --help` for the training options.
)";

const char* kTrainUsage = R"(usage: loupe train MODEL [options]

options (defaults come from the model's recipe; `loupe models` lists them):
  --device cpu|cuda   where to train (default: cuda when a GPU is present, else cpu)
  --epochs N          number of epochs
  --batch N           batch size
  --lr X              learning rate
  --data DIR          the model's data set: MNIST-format files (raw or .gz) for the MNIST models,
                      cifar-10-batches-bin for cifar10_cnn, or image folders DIR/train/<class>/
                      and DIR/test/<class>/ (PNG, JPEG) for either. Default: the first found of
                      $LOUPE_DATA/<set>, ~/.cache/loupe/<set>, ./data/<set> (and for MNIST then
                      fashion-mnist and /usr/share/datasets/fashion-mnist)
  --seed N            seed for the weights, dropout and shuffling (default 1)
  --save PATH         write a checkpoint (model + optimizer) after every epoch
  --resume PATH       continue training from a checkpoint
  --max-steps N       stop each epoch after N steps (for quick checks)
  --threads N         CPU threads for the CPU backend (default: all cores)

input pipeline (default: the asynchronous loader, from host memory):
  --workers N         loader threads collating batches (default 4)
  --prefetch K        batches in flight: slots in the ring (default 4)
  --pin-memory on|off page-locked host slots (default on; off shows what pinning buys)
  --drop-last         drop the last incomplete batch of each epoch
  --precision P       fp32 (default: IEEE float32, no tensor cores); GPU only: tf32 (GEMMs,
                      convolutions and LSTMs on tensor cores with TF32 inputs, fp32 accumulation;
                      PyTorch does this for convolutions and LSTMs by default), fp16 and bf16
                      (mixed precision: 16-bit activations, fp32 master weights; fp16 with
                      dynamic loss scaling)
  --channels-last     convolutions in NHWC (channels-last) memory format: with tf32 on a GPU, cuDNN's
                      tensor-core kernels then need no NCHW<->NHWC transposes
  --graph auto|on|off the training step as one CUDA graph, replayed for every full batch (default
                      auto: on the GPU when the step can be captured, else eager, saying why; on: a
                      graph or an error; off: every kernel issued from the host). Evaluation too.
  --resident          no loader: keep the whole training set on the device, gather by index
  --synthetic[=KIND]  data of the model's shapes, generated once: random (the default; nothing to
                      learn, for benchmarks) or learnable (classes a model can tell apart)

instrumentation (every epoch prints GPU utilisation, MFU, memory, power, timings and advice):
  --metrics FILE      append one JSON object per epoch to FILE (JSON Lines; schema in the README)
  --csv FILE          the same records as CSV
  --busy              measure GPU busy time from CUPTI activity records (adds overhead; reported)
  --no-nvml           do not sample NVML (utilisation, memory, power fields become n/a)
  --price-per-hour X  the machine's price: adds the cost of each epoch and of a million samples
  --profile-steps A:B call cudaProfilerStart/Stop around global steps A..B (for nsys/ncu)
  --trace FILE        write a Chrome/Perfetto trace of host ranges (and GPU activity with --busy)
                      for the --profile-steps window (default steps 10:19)
  --plain             no progress bar (it is also off when stdout is not a terminal)
)";

struct Args {
  std::string command, model;
  std::map<std::string, std::string> opts;
  bool help = false;
};

Args parse(int argc, char** argv) {
  Args a;
  static const std::vector<std::string> known{"device", "epochs", "batch", "lr", "data", "seed", "save",
                                              "resume", "max-steps", "threads", "checkpoint", "metrics",
                                              "csv", "price-per-hour", "profile-steps", "trace", "workers",
                                              "prefetch", "pin-memory", "precision",
                                              "synthetic",  // --synthetic alone, or --synthetic=KIND
                                              "prompt", "length", "temperature", "steps", "warmup", "json",
                                              "png", "sizes", "min-seconds", "rounds", "graph"};
  static const std::vector<std::string> flags{"busy", "no-nvml", "plain", "drop-last", "resident", "synthetic",
                                              "channels-last"};
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h" || s == "--help") { a.help = true; continue; }
    if (s.rfind("--", 0) == 0) {
      std::string key = s.substr(2), val;
      bool is_flag = false;
      for (const auto& f : flags) is_flag |= f == key;
      if (is_flag) {
        a.opts[key] = "1";
        continue;
      }
      size_t eq = key.find('=');
      if (eq != std::string::npos) {
        val = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else {
        if (i + 1 >= argc) throw Error("option --" + key + " needs a value (see loupe --help)");
        val = argv[++i];
      }
      bool ok = false;
      for (const auto& k : known) ok |= k == key;
      if (!ok) throw Error("unknown option --" + key + " (see loupe " + a.command + " --help)");
      a.opts[key] = val;
    } else if (a.command.empty()) {
      a.command = s;
    } else if (a.model.empty()) {
      a.model = s;
    } else {
      throw Error("unexpected argument '" + s + "' (see loupe --help)");
    }
  }
  return a;
}

// Every numeric option and the values it takes (tools/cli_numbers.h parses them; a value outside
// is refused before any data is loaded). The bounds are what the code can carry: counts that are
// narrowed to int, sizes that are multiplied into allocations, threads that are started.
constexpr int64_t kMaxSteps = 1000000000000;  // global step numbers (int64 counters)
struct IntRange {
  const char* key;
  int64_t lo, hi;
};
constexpr IntRange kIntRanges[] = {
    {"epochs", 1, 1000000},       {"batch", 1, 1 << 20},         {"seed", 0, INT64_MAX},
    {"max-steps", 1, kMaxSteps},  {"threads", 1, 1024},          {"workers", 1, 256},
    {"prefetch", 1, 64},          {"length", 1, 1000000},        {"steps", 1, 1000000},
    {"warmup", 0, 1000000},       {"rounds", 1, 1000},           {"sizes", 1, 65536},  // tools/roofline/roofline.cpp's bound
};
struct FloatRange {
  const char* key;
  double lo, hi;  // above lo, at most hi
};
constexpr FloatRange kFloatRanges[] = {
    {"lr", 0, 1000}, {"temperature", 0, 1000}, {"price-per-hour", 0, 1e6}, {"min-seconds", 0, 3600}};

const IntRange& int_range(const std::string& k) {
  for (const auto& r : kIntRanges)
    if (k == r.key) return r;
  throw Error("internal: --" + k + " has no range");
}

int64_t int_opt(const Args& a, const std::string& k, int64_t dflt) {
  auto it = a.opts.find(k);
  if (it == a.opts.end()) return dflt;
  const IntRange& r = int_range(k);
  return tools::parse_int(it->second, "--" + k, r.lo, r.hi);
}

// "32,128,512" for --batch and --sizes, each item in the option's range.
std::vector<int64_t> int_list_opt(const Args& a, const std::string& k) {
  const IntRange& r = int_range(k);
  return tools::parse_int_list(a.opts.at(k), "--" + k, r.lo, r.hi);
}

double float_opt(const Args& a, const std::string& k, double dflt) {
  auto it = a.opts.find(k);
  if (it == a.opts.end()) return dflt;
  for (const auto& r : kFloatRanges)
    if (k == r.key) return tools::parse_double(it->second, "--" + k, r.lo, r.hi);
  throw Error("internal: --" + k + " has no range");
}

std::string str_opt(const Args& a, const std::string& k, const std::string& dflt = "") {
  auto it = a.opts.find(k);
  return it == a.opts.end() ? dflt : it->second;
}

Device pick_device(const Args& a) {
  std::string d = str_opt(a, "device");
  if (d.empty()) {
    if (cuda_available()) return kCUDA;
    std::printf("%s: running on the CPU (--device cpu)\n",
                cuda_runtime() ? "no CUDA GPU is visible" : "this loupe was built without CUDA");
    return kCPU;
  }
  Device dev = parse_device(d);
  if (dev.is_cuda() && !cuda_runtime())
    throw Error("--device cuda: this loupe was built without CUDA; rebuild with the CUDA Toolkit and cuDNN, or use --device cpu");
  if (dev.is_cuda() && !cuda_available())
    throw Error("--device cuda: no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES), or use --device cpu");
  return dev;
}

using tools::Data;

// Models sized by their data (fastText's vocabulary, char_lstm's characters) take the data's size.
std::shared_ptr<nn::Module> build_model(const models::ModelInfo& info, const Data& data) {
  return info.build_for(info.vocab > 0 && data.vocab > 0 ? data.vocab : info.vocab);
}

tools::DataRequest data_request(const Args& a, const models::ModelInfo& info, bool augment, bool resident) {
  tools::DataRequest r{info.recipe.dataset, str_opt(a, "data"), a.opts.count("synthetic") > 0};
  std::string kind = str_opt(a, "synthetic", "1");
  if (r.synthetic && kind != "1") r.synthetic_kind = data::parse_synthetic_kind(kind);
  r.augment = augment;
  r.resident = resident;
  return r;
}

// --precision, checked against the device (the trainer carries it; see core/precision.h).
Precision parse_precision_for(const Args& a, Device dev) {
  Precision p = parse_precision(str_opt(a, "precision", "fp32"));
  std::string why = precision_unsupported(p, dev);
  if (!why.empty()) throw Error(why);
  return p;
}

// --precision and --graph as the trainer takes them.
train::TrainerOptions trainer_options(const Args& a, Device dev) {
  train::TrainerOptions o;
  o.precision = parse_precision_for(a, dev);
  o.graph = train::parse_graph_mode(str_opt(a, "graph", "auto"));
  if (std::string why = train::graph_unsupported(o.graph, dev); !why.empty()) throw Error(why);  // before loading data
  return o;
}

std::string fmt_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string device_description(Device d) {
  if (d.is_cuda()) return d.str() + " (" + cuda_runtime()->device_name() + ")";
  return "cpu (" + std::to_string(num_threads()) + " threads, GEMM: " + cpu::gemm_backend_name() + ")";
}

int cmd_models() {
  for (const auto& m : models::all_models()) {
    const auto& r = m.recipe;
    std::string sized = m.vocab > 0 && m.name != "imdb_bilstm"
                            ? " (with " + std::to_string(m.vocab) + " input ids; the data decides)"
                            : "";
    std::printf("%-14s %s\n               %lld parameters%s; recipe: %s lr %g, batch %lld, %d epochs, data: %s\n",
                m.name.c_str(), m.description.c_str(), (long long)m.expected_parameters, sized.c_str(),
                r.optimizer.c_str(), r.lr, (long long)r.batch, r.epochs, r.dataset.c_str());
  }
  return 0;
}

// A run whose loss became NaN or infinite stops with this status (1 is an error, 130 Ctrl-C).
constexpr int kExitDiverged = 3;

// Divergence, said once with what is kept and what to try.
void report_divergence(const train::EpochStats& st, int epoch, double lr, double recipe_lr, const char* prec,
                       const std::string& save, int saved_epoch, const std::string& resume, int resumed_epoch) {
  std::string kept;
  if (!save.empty() && saved_epoch > 0)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(saved_epoch) + ") is kept as it was";
  else if (!save.empty() && resume == save)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(resumed_epoch) + ") is kept as it was";
  else if (!save.empty())
    kept = "nothing was written to " + save;
  else
    kept = "no checkpoint was asked for (--save)";
  std::fprintf(stderr,
               "loupe: training diverged in epoch %d: the loss became NaN or infinite by step %lld, so the run "
               "stopped there; %s. To try:\n"
               "  - a lower learning rate: --lr %s (a tenth of this run's %s; the recipe's is %s)\n",
               epoch, (long long)st.diverged_step, kept.c_str(), fmt_g(lr / 10).c_str(), fmt_g(lr).c_str(),
               fmt_g(recipe_lr).c_str());
  if (std::string(prec) == "fp16")
    std::fprintf(stderr, "  - float16 overflows above 65504 in the forward pass, which loss scaling cannot help: "
                         "--precision bf16 (float32's range) or fp32\n");
  std::fprintf(stderr, "  - a NaN or infinite value in the input data does the same: check the data set\n");
}

int cmd_train(const Args& a) {
  if (a.model.empty()) throw Error("loupe train needs a model name, e.g. `loupe train mnist_mlp` (see loupe models)");
  const models::ModelInfo& info = models::find_model(a.model);
  if (a.opts.count("threads")) set_num_threads(int(int_opt(a, "threads", 1)));
  tools::install_interrupt_handlers();  // before loading data: Ctrl-C stops within a second anywhere
  int epochs = int(int_opt(a, "epochs", info.recipe.epochs));
  int64_t batch = int_opt(a, "batch", info.recipe.batch);
  double lr = float_opt(a, "lr", info.recipe.lr);
  uint64_t seed = uint64_t(int_opt(a, "seed", 1));
  int64_t max_steps = int_opt(a, "max-steps", -1);
  int workers = int(int_opt(a, "workers", 4)), prefetch = int(int_opt(a, "prefetch", 4));
  double price_per_hour = a.opts.count("price-per-hour") ? float_opt(a, "price-per-hour", 0) : -1;
  std::string trace_path = str_opt(a, "trace");
  std::pair<int64_t, int64_t> profile_steps{-1, -1};
  if (a.opts.count("profile-steps") || !trace_path.empty()) {
    std::string ps = str_opt(a, "profile-steps", "10:19");
    size_t colon = ps.find(':');
    if (colon == std::string::npos)
      throw Error("--profile-steps needs A:B with 1 <= A <= B (global step numbers), got '" + ps + "'");
    profile_steps.first = tools::parse_int(ps.substr(0, colon), "--profile-steps A", 1, kMaxSteps);
    profile_steps.second = tools::parse_int(ps.substr(colon + 1), "--profile-steps B", profile_steps.first, kMaxSteps);
  }
  std::string save = str_opt(a, "save"), resume = str_opt(a, "resume");
  if (!save.empty()) check_checkpoint_destination(save);  // before any data is loaded or step run
  Device dev = pick_device(a);
  const train::TrainerOptions topt = trainer_options(a, dev);
  const char* prec = precision_name(*topt.precision);

  bool resident = a.opts.count("resident") > 0;
  Data data = tools::load_data(data_request(a, info, info.recipe.augment, resident), dev);
  std::unique_ptr<loader::DataLoader> dl;
  std::string pipeline = "whole training set resident on " + dev.str() + ", batches gathered by index";
  if (!resident) {
    loader::LoaderOptions lo;
    lo.batch = batch;
    lo.workers = workers;
    lo.prefetch = prefetch;
    std::string pin = str_opt(a, "pin-memory", "on");
    if (pin != "on" && pin != "off") throw Error("--pin-memory takes on or off, got '" + pin + "'");
    lo.pin_memory = pin == "on";
    lo.drop_last = a.opts.count("drop-last") > 0;
    lo.seed = seed;
    lo.device = dev;
    dl = std::make_unique<loader::DataLoader>(data.host, lo);
    pipeline = "loader: " + std::to_string(lo.workers) + " workers, prefetch " + std::to_string(lo.prefetch) +
               (dev.is_cuda() ? (lo.pin_memory ? ", pinned host slots" : ", pageable host slots") : "") +
               (lo.drop_last ? ", drop-last" : "");
  }
  manual_seed(seed);
  std::shared_ptr<nn::Module> model = build_model(info, data);
  model->to(dev);
  // fp16/bf16 convolutions run channels-last: cuDNN's tensor-core kernels want NHWC (a 3x3 conv
  // measured 382 TFLOP/s in f16 NHWC against 163 in f16 NCHW on an H200).
  // (Only a model with convolutions, 4-D weights, has a memory format to speak of.)
  std::vector<Tensor> params = model->parameters();
  bool has_conv = std::any_of(params.begin(), params.end(), [](const Tensor& p) { return p.dim() == 4; });
  bool channels_last = has_conv && (a.opts.count("channels-last") > 0 || compute_dtype(*topt.precision) != DType::f32);
  if (channels_last) model->set_memory_format(MemoryFormat::ChannelsLast);
  auto opt = models::make_optimizer(info.recipe, model->arena(), lr);
  opt->set_decay(info.recipe.decay);
  int first_epoch = 1;
  if (!resume.empty()) {
    train::CheckpointMeta m = train::load_checkpoint(resume, *model, opt.get(), info.name);
    if (m.epoch >= epochs)
      throw Error("checkpoint '" + resume + "' has already completed " + std::to_string(m.epoch) + " of the " +
                  std::to_string(epochs) + " epochs asked for: nothing to resume (--epochs N with N > " +
                  std::to_string(m.epoch) + " trains further; loupe eval --checkpoint evaluates it)");
    first_epoch = m.epoch + 1;
    seed = m.seed;
    default_generator().seed = m.seed;
    default_generator().offset = m.rng_offset;
    std::printf("resumed from %s after epoch %d\n", resume.c_str(), m.epoch);
  }
  std::printf("model   %s: %s, %lld parameters\n", info.name.c_str(), info.description.c_str(),
              (long long)model->num_parameters());
  std::printf("device  %s\n", device_description(dev).c_str());
  std::printf("data    %s\n", data.description.c_str());
  std::printf("input   %s\n", pipeline.c_str());
  std::printf("recipe  %s lr %g%s, batch %lld, epochs %d, seed %llu, precision %s%s\n", opt->name().c_str(), lr,
              opt->decay() > 0 ? (", decay " + fmt_g(opt->decay()) + " per update").c_str() : "", (long long)batch,
              epochs, (unsigned long long)seed, prec, channels_last ? ", channels-last" : "");

  instrument::MonitorOptions mopt;
  mopt.nvml = !a.opts.count("no-nvml");
  mopt.busy = a.opts.count("busy") > 0;
  mopt.precision = prec;
  mopt.price_per_hour = price_per_hour;
  instrument::EpochMonitor monitor(dev, mopt);
  std::unique_ptr<instrument::JsonlWriter> jsonl;
  std::unique_ptr<instrument::CsvWriter> csv;
  if (a.opts.count("metrics")) jsonl = std::make_unique<instrument::JsonlWriter>(str_opt(a, "metrics"));
  if (a.opts.count("csv")) csv = std::make_unique<instrument::CsvWriter>(str_opt(a, "csv"));
  bool tty = !a.opts.count("plain") && instrument::ProgressBar::stdout_is_tty();
  instrument::AdviceInputs adv;
  adv.cuda = dev.is_cuda();
  adv.tensor_cores = dev.is_cuda() && cuda_runtime()->compute_capability() >= 70;  // Volta and later
  adv.precision = prec;
  adv.batch = batch;

  train::Trainer trainer(*model, *opt, dev, topt);
  std::printf("step    %s\n", trainer.step_mode().c_str());
  std::fflush(stdout);
  trainer.hooks.monitor = &monitor;
  trainer.hooks.stop = &tools::interrupt_requested();
  if (profile_steps.first > 0) trainer.hooks.profile_steps = profile_steps;
  // The trace window: host ranges always, GPU activity when CUPTI is on (--busy).
  double trace_host_t0 = 0;
  uint64_t trace_gpu_t0 = 0;
  trainer.hooks.on_profile = [&](bool begin) {
    if (trace_path.empty()) return;
    instrument::BusyTracker* bt = monitor.busy_tracker();
    if (begin) {
      // Once, at the window's start: GPU work of earlier steps must not land in the window.
      if (bt && dev.is_cuda()) cuda_runtime()->synchronize();
      trace_host_t0 = train::now_seconds();
      if (bt) trace_gpu_t0 = bt->now_ns();
      host_trace_enable(true);
      return;
    }
    host_trace_enable(false);
    std::vector<instrument::TraceEvent> ev;
    for (const auto& r : host_trace_take())
      ev.push_back({r.name, "host", (r.begin - trace_host_t0) * 1e6, (std::max(r.end, r.begin) - r.begin) * 1e6, 1, 1, ""});
    if (bt) {
      if (dev.is_cuda()) cuda_runtime()->synchronize();  // once, at the window's end: its GPU work must finish
      bt->flush();
      for (const auto& r : bt->records(trace_gpu_t0, bt->now_ns()))
        ev.push_back({r.name, r.kind == 0 ? "kernel" : r.kind == 1 ? "memcpy" : "memset",
                      double(int64_t(r.begin_ns - trace_gpu_t0)) / 1e3, double(r.end_ns - r.begin_ns) / 1e3, 1,
                      int(100 + r.stream), ""});
    }
    instrument::write_chrome_trace(trace_path, ev);
    std::printf("trace of steps %lld..%lld written to %s (%zu events%s)\n",
                (long long)trainer.hooks.profile_steps.first, (long long)trainer.hooks.profile_steps.second,
                trace_path.c_str(), ev.size(), bt ? "" : "; host ranges only: add --busy for GPU activity");
  };
  if (first_epoch > 1) {
    int64_t steps_per_epoch = dl ? dl->batches_per_epoch() : (data.train.size() + batch - 1) / batch;
    if (max_steps >= 0) steps_per_epoch = std::min(steps_per_epoch, max_steps);
    trainer.set_global_step(int64_t(first_epoch - 1) * steps_per_epoch);
  }

  double best = -1, last = -1;
  int best_epoch = 0, saved_epoch = 0;
  double t_start = train::now_seconds();
  for (int e = first_epoch; e <= epochs; ++e) {
    int64_t total = dl ? dl->batches_per_epoch() : (data.train.size() + batch - 1) / batch;
    if (max_steps >= 0) total = std::min(total, max_steps);
    instrument::ProgressBar bar(e, epochs, total, tty);
    double te = train::now_seconds();
    // The bar only where it is drawn: otherwise the step has no per-step host work for it at all.
    if (tty)
      trainer.hooks.on_step = [&](int64_t step, int64_t, int64_t samples, std::optional<double> loss) {
        bar.update(step, train::now_seconds() - te, samples, loss);
      };
    train::EpochStats st = dl ? trainer.train_epoch(*dl, e, max_steps)
                              : trainer.train_epoch(data.train, batch, seed, e, max_steps);
    if (st.interrupted) {
      bar.finish();
      std::printf("interrupted in epoch %d after %lld steps; stopping cleanly (no checkpoint of the partial epoch)\n",
                  e, (long long)st.steps);
      if (dl) dl->stop();
      return tools::interrupt_exit_status();
    }
    bar.finish();
    if (st.diverged) {
      if (dl) dl->stop();
      report_divergence(st, e, lr, info.recipe.lr, prec, save, saved_epoch, resume, first_epoch - 1);
      return kExitDiverged;
    }
    if (!st.graph_event.empty()) std::printf("step    %s\n", st.graph_event.c_str());
    if (!st.precision_event.empty()) std::printf("precision %s\n", st.precision_event.c_str());
    double t0 = train::now_seconds();
    try {
      st.test_acc = trainer.evaluate(data.test);
    } catch (const train::Interrupted&) {
      std::printf("interrupted while evaluating epoch %d; stopping cleanly (no checkpoint of it)\n", e);
      if (dl) dl->stop();
      return tools::interrupt_exit_status();
    }
    st.eval_seconds = train::now_seconds() - t0;
    last = st.test_acc;
    if (st.test_acc > best) { best = st.test_acc; best_epoch = e; }

    instrument::EpochReport r = tools::epoch_report(info.name, dev, batch, st, epochs);
    monitor.fill(r);
    r.advice = instrument::advise(r, adv);
    std::printf("%s\n", instrument::epoch_line(r).c_str());
    std::fflush(stdout);
    tools::CriticalSection writing;  // Ctrl-C now waits for these lines and the checkpoint
    if (jsonl) jsonl->write(r);
    if (csv) csv->write(r);
    if (!save.empty()) {
      NvtxRange ck("checkpoint");
      train::save_checkpoint(save, *model, opt.get(), {info.name, e, seed, default_generator().offset});
      saved_epoch = e;
    }
  }
  if (best >= 0)
    std::printf("done in %.1f s: final test accuracy %.2f%%, best %.2f%% (epoch %d)%s\n",
                train::now_seconds() - t_start, 100 * last, 100 * best, best_epoch,
                save.empty() ? "" : ("; checkpoint in " + save).c_str());
  return 0;
}

// Host-to-device bandwidth: the same copies the loader makes, from page-locked and from pageable
// memory, timed on the host around `reps` copies and a wait for the last.
int cmd_copybench(const Args& a) {
  Device dev = pick_device(a);
  if (!dev.is_cuda()) throw Error("loupe copybench measures host-to-device copies; it needs --device cuda");
  int64_t batch = int_opt(a, "batch", 128);
  CudaRuntime* rt = cuda_runtime();
  void* stream = rt->stream_create();
  std::printf("device  %s\n", rt->device_name().c_str());
  for (int64_t bytes : {(batch * 784 + batch) * 4, int64_t(64) << 20}) {
    Tensor dst = empty(Shape{bytes / 4}, DType::f32, dev);
    for (bool pinned : {true, false}) {
      Tensor src = pinned ? empty_pinned(Shape{bytes / 4}, DType::f32) : empty(Shape{bytes / 4}, DType::f32, kCPU);
      fill_(src, 1.0);
      int reps = bytes < (1 << 24) ? 2000 : 50;
      rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);  // warm-up
      void* e = rt->event_record_on(stream);
      rt->event_synchronize(e);
      rt->event_destroy(e);
      double t0 = train::now_seconds();
      for (int r = 0; r < reps; ++r)
        rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);
      e = rt->event_record_on(stream);
      rt->event_synchronize(e);
      rt->event_destroy(e);
      double secs = train::now_seconds() - t0;
      std::printf("%-9s %9.3f MiB x %4d: %6.1f GB/s  (%.1f us per copy)\n", pinned ? "pinned" : "pageable",
                  double(bytes) / (1 << 20), reps, double(bytes) * reps / secs / 1e9, secs / reps * 1e6);
    }
  }
  return 0;
}

int cmd_peak(const Args& a) {
  Device dev = pick_device(a);
  if (!dev.is_cuda()) throw Error("loupe peak measures a GPU; none is in use (--device cuda)");
  std::string name = cuda_runtime()->device_name(), why;
  std::printf("device  %s\n", name.c_str());
  auto m = instrument::measure_gpu_peak(&why);
  if (!m) throw Error("cannot measure: " + why);
  auto sheet = instrument::datasheet_peak(name, "fp32");
  std::printf("fp32 FMA loop   %7.1f TFLOP/s\nfp32 SGEMM 8192 %7.1f TFLOP/s\n", m->fma_tflops, m->sgemm_tflops);
  if (sheet) std::printf("%s: %.1f TFLOP/s (FMA loop reaches %.0f%% of it)\n", sheet->source.c_str(), sheet->tflops,
                         100 * m->fma_tflops / sheet->tflops);
  else std::printf("no datasheet entry for this GPU\n");
  return 0;
}

int cmd_eval(const Args& a) {
  if (a.model.empty()) throw Error("loupe eval needs a model name and --checkpoint PATH");
  std::string ck = str_opt(a, "checkpoint");
  if (ck.empty()) throw Error("loupe eval needs --checkpoint PATH (written by loupe train --save PATH)");
  const models::ModelInfo& info = models::find_model(a.model);
  Device dev = pick_device(a);
  const train::TrainerOptions topt = trainer_options(a, dev);
  Data data = tools::load_data(data_request(a, info, false, true), dev);
  std::shared_ptr<nn::Module> model = build_model(info, data);
  model->to(dev);
  train::CheckpointMeta m = train::load_checkpoint(ck, *model, nullptr, info.name);
  auto opt = models::make_optimizer(info.recipe, model->arena(), info.recipe.lr);  // the trainer wants one; unused
  train::Trainer trainer(*model, *opt, dev, topt);
  double acc = trainer.evaluate(data.test);
  std::printf("%s after %d epochs, on %s: test accuracy %.2f%%\n", info.name.c_str(), m.epoch,
              data.description.c_str(), 100 * acc);
  return 0;
}

// char_lstm's sampling loop, as the Keras example: the last 40 characters in, the next one drawn
// from the softmax sharpened by the temperature (p_i ~ p_i^(1/T)), appended, repeated.
int cmd_generate(const Args& a) {
  if (a.model != "char_lstm") throw Error("loupe generate works with char_lstm (a character model), got '" + a.model + "'");
  std::string ck = str_opt(a, "checkpoint");
  if (ck.empty()) throw Error("loupe generate needs --checkpoint PATH (written by loupe train char_lstm --save PATH)");
  const models::ModelInfo& info = models::find_model(a.model);
  Device dev = pick_device(a);
  PrecisionScope precision_scope(parse_precision_for(a, dev));
  int64_t length = int_opt(a, "length", 400);
  double temperature = float_opt(a, "temperature", 0.5);
  uint64_t seed = uint64_t(int_opt(a, "seed", 1));
  Data data = tools::load_data(data_request(a, info, false, true), dev);  // the corpus gives the characters
  std::shared_ptr<nn::Module> model = build_model(info, data);
  model->to(dev);
  train::load_checkpoint(ck, *model, nullptr, info.name);
  model->eval();
  const data::CharCorpus& corpus = *data.corpus;
  std::vector<int32_t> text;
  if (a.opts.count("prompt")) {
    text = corpus.encode(str_opt(a, "prompt"));
    if (text.empty()) throw Error("--prompt is empty");
  } else {  // a random window of the corpus, as the Keras example starts
    int64_t k = int64_t(philox(seed, 0, 77).v[0] % uint64_t(corpus.num_windows(40, 3)));
    text = corpus.window(k, 40, 3);
  }
  size_t prompt_len = text.size();
  NoGradGuard g;
  for (int64_t i = 0; i < length; ++i) {
    size_t start = text.size() > 40 ? text.size() - 40 : 0;
    std::vector<float> window(text.begin() + long(start), text.end());
    Tensor x = to(from_vector(window, Shape{1, int64_t(window.size())}), dev);
    std::vector<float> logits = (*model)(x).to_vector<float>();
    double mx = *std::max_element(logits.begin(), logits.end()), total = 0;
    std::vector<double> p(logits.size());
    for (size_t c = 0; c < p.size(); ++c) total += p[c] = std::exp((logits[c] - mx) / temperature);
    double u = philox_uniform(seed, uint64_t(i), 78) * total, acc = 0;
    size_t pick = p.size() - 1;
    for (size_t c = 0; c < p.size(); ++c)
      if ((acc += p[c]) > u) {
        pick = c;
        break;
      }
    text.push_back(int32_t(pick));
  }
  std::string prompt = corpus.decode(std::vector<int32_t>(text.begin(), text.begin() + long(prompt_len)));
  std::string out = corpus.decode(std::vector<int32_t>(text.begin() + long(prompt_len), text.end()));
  std::printf("prompt (%zu characters): %s\n---\n%s%s\n", prompt_len, prompt.c_str(), prompt.c_str(), out.c_str());
  return 0;
}

tools::BenchOptions bench_options(const Args& a, std::vector<std::string> models) {
  tools::BenchOptions o;
  o.models = std::move(models);
  if (a.opts.count("batch")) o.batches = int_list_opt(a, "batch");
  if (a.opts.count("precision")) o.precisions = tools::parse_list(str_opt(a, "precision"));
  for (const std::string& p : o.precisions) parse_precision(p);  // refuse unknown or unimplemented ones first
  o.steps = int_opt(a, "steps", 100);
  o.warmup = int_opt(a, "warmup", 10);
  o.min_seconds = float_opt(a, "min-seconds", -1);
  o.rounds = int(int_opt(a, "rounds", 1));
  o.device = pick_device(a);
  o.nvml = !a.opts.count("no-nvml");
  o.busy = a.opts.count("busy") > 0;
  o.channels_last = a.opts.count("channels-last") > 0;
  o.seed = uint64_t(int_opt(a, "seed", 1));
  o.graph = train::parse_graph_mode(str_opt(a, "graph", "auto"));
  if (std::string why = train::graph_unsupported(o.graph, o.device); !why.empty()) throw Error(why);
  if (a.opts.count("threads")) set_num_threads(int(int_opt(a, "threads", 1)));
  return o;
}

void write_reports(const std::vector<instrument::EpochReport>& rs, const std::string& json, const std::string& csv) {
  if (!json.empty()) {
    instrument::JsonlWriter w(json);
    for (const auto& r : rs) w.write(r);
    std::printf("wrote %s (JSON Lines, one record per row)\n", json.c_str());
  }
  if (!csv.empty()) {
    instrument::CsvWriter w(csv);
    for (const auto& r : rs) w.write(r);
    std::printf("wrote %s\n", csv.c_str());
  }
}

int cmd_bench(const Args& a) {
  std::vector<std::string> models = tools::parse_list(a.model);
  if (models.empty())
    for (const auto& m : models::all_models()) models.push_back(m.name);
  for (const std::string& m : models) models::find_model(m);  // unknown names fail before any run
  auto reports = tools::run_bench(bench_options(a, models));
  write_reports(reports, str_opt(a, "json"), str_opt(a, "csv"));
  return 0;
}

// A plotting script, beside the sources (LOUPE_TOOLS_DIR overrides), run by a Python that has
// matplotlib: Debian's /usr/bin/python3 first (a pyenv python3 on PATH may lack it).
int plot(const std::string& name, const std::string& csv, const std::string& png) {
  const char* env = std::getenv("LOUPE_TOOLS_DIR");
  std::string script = std::string(env ? env : LOUPE_TOOLS_DIR) + "/" + name;
  std::string python = std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") == 0 ? "/usr/bin/python3"
                                                                                                    : "python3";
  std::string cmd = python + " '" + script + "' '" + csv + "' '" + png + "'";
  std::fflush(stdout);  // our lines first, then the script's
  int rc = std::system(cmd.c_str());
  if (rc != 0)
    std::printf("plot not written: `%s` failed; it needs matplotlib (apt-get install python3-matplotlib, which "
                "tools/setup.sh installs); the table is in %s\n", cmd.c_str(), csv.c_str());
  return rc == 0 ? 0 : 1;
}

int cmd_sweep(const Args& a) {
  if (a.model.empty() || a.model.find(',') != std::string::npos)
    throw Error("loupe sweep takes one model, e.g. `loupe sweep mnist_mlp --batch 32,128,512,2048`");
  if (!a.opts.count("batch")) throw Error("loupe sweep needs --batch LIST, e.g. --batch 32,128,512,2048");
  auto reports = tools::run_bench(bench_options(a, {a.model}));
  std::string csv = str_opt(a, "csv", "sweep-" + a.model + ".csv"), png = str_opt(a, "png", "sweep-" + a.model + ".png");
  write_reports(reports, str_opt(a, "json"), csv);
  std::printf("%s", tools::sweep_summary(reports).c_str());
  return plot("plot_sweep.py", csv, png);
}

int cmd_roofline(const Args& a) {
  tools::RooflineOptions o;
  if (a.opts.count("sizes")) o.sizes = int_list_opt(a, "sizes");
  o.min_seconds = float_opt(a, "min-seconds", o.min_seconds);
  std::string d = str_opt(a, "device");
  o.gpu = d.empty() ? cuda_available() : pick_device(a).is_cuda();
  auto rows = tools::run_roofline(o);
  // The devices' yardsticks (once each), then one line per implementation and size.
  std::vector<std::string> seen;
  for (const auto& r : rows) {
    if (std::find(seen.begin(), seen.end(), r.device_name) != seen.end()) continue;
    seen.push_back(r.device_name);
    if (r.peak_gflops || r.impl.rfind("cpu", 0) != 0)
      std::printf("%s: copy bandwidth %.0f GB/s (read + write)", r.device_name.c_str(), r.bandwidth_bytes_per_s / 1e9);
    else
      std::printf("%s: read bandwidth %.0f GB/s (a sum over 512 MiB)", r.device_name.c_str(), r.bandwidth_bytes_per_s / 1e9);
    if (r.peak_gflops) {
      std::printf(", fp32 peak %.1f TFLOP/s (FMA loop)", *r.peak_gflops / 1e3);
      if (auto sheet = instrument::datasheet_peak(r.device_name, "fp32"))
        std::printf("; %s %.1f TFLOP/s", sheet->source.c_str(), sheet->tflops);
    }
    std::printf("\n");
  }
  std::printf("%-13s %6s %10s %9s %9s %9s %10s\n", "impl", "n", "GFLOP/s", "GB/s", "roofline", "of peak",
              "rel error");
  for (const auto& r : rows)
    std::printf("%-13s %6lld %10.1f %9.1f %8.1f%% %9s %10.1e\n", r.impl.c_str(), (long long)r.n, r.gflops,
                r.bytes_per_s / 1e9, 100 * r.roofline_fraction,
                r.peak_gflops ? (std::to_string(int(std::round(1000 * r.gflops / *r.peak_gflops)) / 10.0).substr(0, 4) + "%").c_str()
                              : "n/a",
                r.max_rel_error);
  std::string csv = str_opt(a, "csv", "roofline.csv"), png = str_opt(a, "png", "roofline.png");
  FILE* f = std::fopen(csv.c_str(), "w");
  if (!f) throw Error("cannot write " + csv);
  std::fprintf(f, "device_name,impl,n,seconds,gflops,bytes_per_s,roofline_fraction,bandwidth_bytes_per_s,peak_gflops,"
                  "max_rel_error\n");
  for (const auto& r : rows) {
    std::fprintf(f, "%s,%s,%lld,%.9g,%.9g,%.9g,%.9g,%.9g,", r.device_name.c_str(), r.impl.c_str(), (long long)r.n,
                 r.seconds, r.gflops, r.bytes_per_s, r.roofline_fraction, r.bandwidth_bytes_per_s);
    if (r.peak_gflops) std::fprintf(f, "%.9g", *r.peak_gflops);
    std::fprintf(f, ",%.3g\n", r.max_rel_error);
  }
  std::fclose(f);
  std::printf("table in %s\n", csv.c_str());
  return plot("plot_roofline.py", csv, png);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    if (a.command.empty() || a.command == "help") {
      std::fputs(kUsage, stdout);
      return a.command.empty() && !a.help ? 2 : 0;
    }
    if (a.command == "train" && a.help) { std::fputs(kTrainUsage, stdout); return 0; }
    if (a.help) { std::fputs(kUsage, stdout); return 0; }
    if (a.command == "train") return cmd_train(a);
    if (a.command == "eval") return cmd_eval(a);
    if (a.command == "generate") return cmd_generate(a);
    if (a.command == "bench") return cmd_bench(a);
    if (a.command == "sweep") return cmd_sweep(a);
    if (a.command == "models") return cmd_models();
    if (a.command == "peak") return cmd_peak(a);
    if (a.command == "roofline") return cmd_roofline(a);
    if (a.command == "copybench") return cmd_copybench(a);
    throw Error("unknown command '" + a.command + "' (see loupe --help)");
  } catch (const train::Interrupted&) {
    std::fprintf(stderr, "loupe: interrupted\n");
    return tools::interrupt_exit_status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loupe: %s\n", e.what());
    return 1;
  }
}
