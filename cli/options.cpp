#include "cli/options.h"
#include "models/keras_json.h"
#include "models/registry.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "cli/cli_numbers.h"
#include "run/controls.h"
#include "run/target.h"
#include "train/lr_schedule.h"

namespace loupe::cli {

const char* const kUsage = R"(loupe: train deep networks on the CPU and NVIDIA GPUs, and see how well the GPU was used.

usage:
  loupe train MODEL [options]     train a reference model (defaults from its recipe), or a
                                  Keras model file: MODEL ends in .json (model.to_json()) or
                                  .keras (model.save, with its weights)
  loupe eval MODEL --checkpoint PATH [--data DIR] [--device D]
                                  test accuracy of a saved model (of a .keras file: its own)
  loupe generate char_lstm --checkpoint PATH [--prompt TEXT] [--length 400] [--temperature 0.5]
                [--data FILE] [--seed N]  sample text from a trained char_lstm (the checkpoint's
                                  characters; no prompt: a random 40-character window of --data)
  loupe bench [MODEL,MODEL...] [--batch LIST] [--precision LIST] [--steps N] [--min-seconds S]
              [--rounds R] [--graph auto|on|off] [--json F] [--csv F]
                                  time training steps per (model, batch, precision): samples/s,
                                  ms/step, GPU busy and utilisation, MFU, memory, power, samples/J
                                  (on the CPU: threads, cores, waited, GFLOP/s, peak RSS); at least
                                  N steps (100) and S seconds (GPU 2, CPU 0) each; R rounds in turn,
                                  the fastest kept (the host's speed drifts); --gpus 1,2: scaling
  loupe sweep MODEL --batch 32,128,512,2048 [--precision fp32,fp16] [--csv F] [--png F]
                                  the same table for one model, written as CSV and plotted (PNG)
  loupe profile MODEL [options]   where a training step's time goes, op by op: GPU time, share,
                                  FLOPs, bytes, achieved rates against the measured ceilings, what
                                  bounds each op, and the three best targets (CSV, JSON, roofline PNG)
  loupe models                    list the models and their recipes
  loupe peak [--device cuda]      measure the GPU's fp32 peak (FMA loop, SGEMM) beside its datasheet
  loupe roofline [--sizes 1024,2048,4096,8192,16384] [--device cpu] [--csv F] [--png F]
                                  the matrix-vector roofline study: y = A x by cuBLAS sgemv, a naive
                                  kernel, ours, and the CPU (one thread, all threads, the BLAS), in
                                  GFLOP/s and as a fraction of the measured copy bandwidth; plotted
  loupe compare RUN.jsonl RUN.jsonl... [--labels a,b] [--price-per-hour P1,P2] [--csv F] [--plot F]
                                  runs side by side (the JSONL of train --metrics or bench --json):
                                  samples/s, busy, MFU, J/sample, cost per million samples, each
                                  with its ratio to the first run; median over epochs 2..
  loupe copybench [--batch N]     host-to-device bandwidth from pinned and pageable memory, for one
                                  loader slot of mnist_mlp's batch (default 128) and for 64 MiB
  loupe --help | loupe COMMAND --help | loupe help COMMAND | loupe --version

Run `loupe COMMAND --help` for a command's options (`loupe train --help`: the training options).
)";

const char* const kTrainUsage = R"(usage: loupe train MODEL [options]

MODEL is a reference model (`loupe models` lists them) or a Keras model file, Sequential or
functional, what model.to_json() writes (FILE.json; docs/keras.md): it trains on the data set whose samples have its
input shape (MNIST's, CIFAR-10's, IMDb's), or on NumPy arrays of that shape (--data DIR with
x_train.npy, y_train.npy, x_test.npy, y_test.npy, or --data FILE.npz of them), with the optimizer
and loss of its compile_config.

options (defaults come from the model's recipe):
  --device cpu|cuda   where to train (default: cuda when a GPU is present, else cpu)
  -e, --epochs N      number of epochs
  -b, --batch N       batch size
  --lr X              learning rate
  --optimizer NAME    adam, rmsprop, sgd or adadelta, with Keras's defaults for it (its learning
                      rate too, unless --lr): instead of the recipe's or the model file's
  --loss NAME         categorical_crossentropy, sparse_categorical_crossentropy,
                      binary_crossentropy or mean_squared_error (mse), as Keras names them: instead
                      of the model file's (on a linear last layer, the outputs as logits; a file
                      without one needs it; mean_squared_error: a regression on NumPy targets)
  --data DIR          the model's data set: MNIST-format files (raw or .gz) for the MNIST models,
                      cifar-10-batches-bin for cifar10_cnn, or for either image folders
                      DIR/train/<class>/ and DIR/test/<class>/ (PNG, JPEG) or NumPy arrays
                      DIR/x_train.npy, y_train.npy, x_test.npy, y_test.npy. Default: the first found of
                      $LOUPE_DATA/<set>, ~/.cache/loupe/<set>, ./data/<set> (and for MNIST then
                      fashion-mnist and /usr/share/datasets/fashion-mnist)
  --val-split F       NumPy arrays without x_test.npy and y_test.npy: the last F of the training
                      arrays (above 0, at most 0.9) are the test set, as Keras's validation_split
  --seed N            seed for the weights, dropout and shuffling (default 1)
  --save PATH         write a checkpoint (model + optimizer) after every epoch
  --save-best         with --save: write it only at an epoch that betters the best so far (by
                      --early-stop's monitor, else the test loss): the file holds the best epoch
  --resume PATH       continue training from a checkpoint
  --weights FILE      start from weights trained in Keras (a model file's model): a .h5 file of
                      Keras 2 or tf.keras (model.save, save_weights) or Keras 3's .weights.h5
  --save-keras FILE.keras
                      at the end, the model file's model and its trained weights as Keras 3's
                      .keras file (config.json, metadata.json, model.weights.h5)
  --lr-schedule SPEC  the learning rate over the updates, as Keras's schedules (initial: --lr):
                      exponential:decay_steps=1000,decay_rate=0.96[,staircase]
                      inverse_time:decay_steps=1000,decay_rate=0.5[,staircase]
                      cosine:decay_steps=10000[,alpha=0.01][,warmup_target=0.01,warmup_steps=500]
                      piecewise:boundaries=1000/2000,values=0.1/0.01/0.001
                      step:step_size=10,gamma=0.5 (per epoch, as PyTorch's StepLR)
                      plateau:factor=0.5,patience=3[,min_delta=1e-4,cooldown=0,min_lr=0,mode=max]
                      (Keras's ReduceLROnPlateau on the test loss; mode=max: the test accuracy)
  --early-stop N[,monitor=test_acc][,min_delta=D]
                      stop after N epochs without a better test loss (or accuracy); the best
                      epoch's weights are restored at the end, stopped early or not
  --target-acc A      stop at the first epoch whose test accuracy reaches A (0.91: 91 %), and
                      print the seconds, joules and cost it took (--price-per-hour)
  --seeds N           with --target-acc: N runs, of seeds --seed to --seed + N - 1, and the mean
                      and spread of their time, energy and cost (one record in --metrics)
  --max-steps N       stop each epoch after N steps, and evaluate at most N batches of 1000
                      (for quick checks)
  --threads N         CPU threads for the CPU backend, fixed (default: the cores it may use, fewer
                      while other processes hold some, docs/performance.md)

input pipeline (default: the asynchronous loader, from host memory):
  -j, --workers N     loader threads collating batches (default 4)
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
  --synthetic [KIND]  data of the model's shapes, generated once: random (the default; nothing to
                      learn, for benchmarks) or learnable (classes a model can tell apart)

instrumentation (every epoch prints GPU utilisation, MFU, memory, power, timings and advice):
  --metrics FILE      append one JSON object per epoch to FILE (JSON Lines; fields in docs/profiling.md)
  --csv FILE          the same records as CSV
  --tensorboard DIR   write TensorBoard event files into DIR: per step the running loss and samples/s,
                      per epoch every measured figure of the report, the run's constants once as
                      the text run/config and as hparams, train/test accuracy on one chart, and the
                      GPU's NVML samples as gpu/* series (`tensorboard --logdir DIR`)
  --busy              measure GPU busy time from CUPTI activity records (adds overhead; reported)
  --no-nvml           do not sample NVML (utilisation, memory, power fields become n/a)
  --price-per-hour X  the machine's price: adds the cost of each epoch and of a million samples
  --timeline FILE     write NVML's samples over time (utilisation, memory, power, temperature, SM
                      clock) and the epoch, evaluation and checkpoint marks as CSV, appended at each
                      epoch's end (scripts/plot_timeline.py draws it; marks only where NVML is absent;
                      --gpus N: every GPU of rank 0's host, one gpu value per rank)
  --sample-ms N       NVML's sampling period in milliseconds (default 50)
  --profile-steps A:B call cudaProfilerStart/Stop around global steps A..B (for nsys/ncu)
  --trace FILE        write a Chrome/Perfetto trace of host ranges (and GPU activity with --busy)
                      for the --profile-steps window (default steps 10:19)
  --plain             no progress bar (it is also off when stdout is not a terminal)

data parallelism (NCCL; docs/plans/data_parallel.md):
  --gpus N            one process per GPU on this host, started by loupe; --batch is per GPU, the
                      gradients are averaged in buckets during backward, evaluation is sharded;
                      rank 0 prints the run, every rank appends its records to --metrics
  --nnodes K          hosts (default 1); each runs the same command with its --node-rank
  --node-rank I       this host's place, 0..K-1 (rank = I * N + local GPU)
  --master ADDR:PORT  rank 0's host and a free port there, for the rendezvous (default: this host;
                      MASTER_ADDR and MASTER_PORT as torchrun's are read too)
  --baseline X        one GPU's samples/s at the same per-GPU batch: the run's scaling efficiency
)";

namespace {

// The other subcommands' `--help` (train's is kTrainUsage). Every option a subcommand takes
// (kSpecs below) is in its text: test_cli checks it.
const char* const kEvalUsage = R"(usage: loupe eval MODEL --checkpoint PATH [options]
       loupe eval MODEL.json --weights FILE [options]
       loupe eval MODEL.keras [options]

The test accuracy of a model saved by `loupe train MODEL --save PATH`, or of a model file with
weights trained in Keras (a .keras file holds its own).

options:
  --checkpoint PATH   the checkpoint to evaluate
  --weights FILE      or Keras's weights for a model file: a .h5 (Keras 2, tf.keras) or .weights.h5
                      (Keras 3) file
  --device cpu|cuda   where to evaluate (default: cuda when a GPU is present, else cpu)
  --data DIR          the model's data set, as for loupe train (default: the same lookup)
  --val-split F       NumPy arrays without test arrays: the last F of the training ones (as train)
  --synthetic [KIND]  evaluate on the synthetic set of the model's shapes (random or learnable)
  --loss NAME         the test loss's, as Keras names it (as loupe train)
  --precision P       fp32 (default); GPU only: tf32, fp16, bf16
  --graph auto|on|off evaluation as a CUDA graph (default auto)
)";

const char* const kGenerateUsage = R"(usage: loupe generate char_lstm --checkpoint PATH [options]

Sample text from a char_lstm trained by `loupe train char_lstm --save PATH`.

options:
  --checkpoint PATH   the trained char_lstm (required)
  --prompt TEXT       the text to continue (default: a random 40-character window of the corpus)
  --length N          characters to generate (default 400)
  --temperature X     sampling temperature, above 0 (default 0.5; lower: more conservative)
  --seed N            seed of the sampling and of the random window (default 1)
  --data FILE         the corpus the model was trained on, for the random window (default: the
                      same lookup as loupe train); its characters must be the checkpoint's. Not
                      read with --prompt when the checkpoint stores its characters (older ones do not)
  --synthetic [KIND]  the synthetic corpus instead (for a model trained with --synthetic)
  --device cpu|cuda   where to run (default: cuda when a GPU is present, else cpu)
  --precision P       fp32 (default); GPU only: tf32, fp16, bf16
)";

// bench and sweep share their measurement options.
#define LOUPE_BENCH_OPTIONS \
  "  --precision LIST    comma-separated precisions, e.g. fp32,fp16 (default fp32; tf32, fp16, bf16 need\n" \
  "                      a GPU)\n" \
  "  --device cpu|cuda   where to measure (default: cuda when a GPU is present, else cpu)\n" \
  "  --steps N           at least N timed steps per measurement (default 100), cycling through the data\n" \
  "  --warmup N          untimed steps before them (default 10)\n" \
  "  --min-seconds S     and at least S seconds of them (default: 2 on a GPU, 0 on the CPU)\n" \
  "  --rounds R          measure every configuration R times in turn, keep the fastest (default 1)\n" \
  "  --graph auto|on|off the step as a CUDA graph (default auto)\n" \
  "  --channels-last     convolutions in NHWC memory format\n" \
  "  --threads N         CPU threads for the CPU backend (default: all cores)\n" \
  "  --seed N            seed of the weights and the synthetic data (default 1)\n" \
  "  --busy              GPU busy time from CUPTI activity records (adds overhead)\n" \
  "  --no-nvml           do not sample NVML (utilisation, memory and power become n/a)\n" \
  "  --price-per-hour X  the machine's price: adds each row's cost per million samples ($/M samples)\n" \
  "  --json FILE         the rows as JSON Lines (the fields of `loupe train --metrics`), rewritten\n" \
  "                      whole as each row finishes: Ctrl-C keeps the rows finished\n" \
  "  --loss NAME         a model file's loss, as Keras names it (as loupe train)\n"

const char* const kBenchUsage = "usage: loupe bench [MODEL,MODEL...] [options]\n\n"
    "Times training steps per (model, batch, precision) on synthetic data resident on the device:\n"
    "samples/s, ms/step, GPU busy and utilisation, MFU, memory, power, samples/J on a GPU; threads,\n"
    "cores used, time waited for a core, GFLOP/s and peak RSS on the CPU. No model: all of them.\n\n"
    "options:\n"
    "  --batch LIST        comma-separated batch sizes (default: each model's recipe batch)\n"
    LOUPE_BENCH_OPTIONS
    "  --csv FILE          the rows as CSV, each row added as it finishes\n"
    "\ndata parallelism (NCCL, or the copy engines between GPUs of one host):\n"
    "  --gpus LIST         world sizes, e.g. 1,2: each one a `loupe train MODEL --synthetic --resident\n"
    "                      --gpus N` run; prints samples/s, per GPU, scaling efficiency against the\n"
    "                      smallest size, the all-reduce's share of the time (from one more run with\n"
    "                      --busy) and NCCL's bus bandwidth; --batch is per GPU, --rounds alternates\n"
    "                      the sizes\n"
    "  --epochs N          epochs per run (default 6; samples/s is the median of epochs 2..)\n"
    "\nexamples: loupe bench mnist_mlp,mnist_cnn --device cpu --steps 20\n"
    "          loupe bench cifar10_cnn --gpus 1,2 --batch 1024 --precision fp16\n";

const char* const kSweepUsage = "usage: loupe sweep MODEL --batch LIST [options]\n\n"
    "The bench table for one model over batch sizes (and precisions), written as CSV and plotted.\n\n"
    "options:\n"
    "  --batch LIST        comma-separated batch sizes (required), e.g. 32,128,512,2048\n"
    LOUPE_BENCH_OPTIONS
    "  --csv FILE          the table (default sweep-MODEL.csv)\n"
    "  --png FILE          the plot, drawn by plot_sweep.py (default sweep-MODEL.png; needs matplotlib)\n"
    "\nexample: loupe sweep mnist_mlp --batch 32,128,512 --device cpu --steps 20\n";
#undef LOUPE_BENCH_OPTIONS

const char* const kRooflineUsage = R"(usage: loupe roofline [options]

The matrix-vector roofline study: y = A x by cuBLAS sgemv, a naive kernel, loupe's, and the CPU
(one thread, all threads, the BLAS), in GFLOP/s and as a fraction of the measured copy bandwidth;
each checked against float64. Written as CSV and plotted (docs/benchmarks.md).

options:
  --sizes LIST        comma-separated matrix sizes n (n x n) (default 1024,2048,4096,8192,16384)
  --device cpu|cuda   cpu: the CPU rows only (default: the GPU rows too when a GPU is present)
  --min-seconds S     repeat each measurement for at least S seconds (default 0.05)
  --csv FILE          the table (default roofline.csv)
  --png FILE          the plot, drawn by plot_roofline.py (default roofline.png; needs matplotlib)
)";

const char* const kCompareUsage = R"(usage: loupe compare RUN.jsonl RUN.jsonl... [options]

Runs side by side: the same model on two GPUs, or at two precisions, batches or loader settings.
Each RUN.jsonl is what `loupe train --metrics FILE` or `loupe bench --json FILE` wrote. Records are
grouped by (model, batch, precision); each group's figure is the median over epochs 2.. (epoch 1
holds algorithm search and graph capture; a run of one epoch uses it and says so). Per run: the GPU,
samples/s, GPU busy %, MFU %, joules per sample, cost per million samples, each with its ratio to
the first run; a figure the run did not measure is n/a. Runs with one group each are compared in
one table (a warning when their models differ); files with several groups (bench over many models)
are compared group by group.

options:
  --labels a,b,...    the runs' names in the table and plot (default: the file names)
  --price-per-hour P1,P2,...
                      each run's machine price per hour, one per run: the cost per million samples
                      (default: the run's own cost_per_million_samples, from train --price-per-hour)
  --csv FILE          the table as CSV
  --plot FILE.png     a grouped bar chart of the table, drawn by plot_compare.py (needs matplotlib;
                      it reads the table from --csv, else from FILE.png.csv, written for it)

example: loupe compare h100.jsonl h200.jsonl --labels H100,H200 --price-per-hour 2.5,3.5
)";

const char* const kModelsUsage = R"(usage: loupe models

Lists the reference models, their parameter counts and their recipes (optimizer, learning rate,
batch, epochs, data set). Takes no options.
)";

const char* const kPeakUsage = R"(usage: loupe peak [--device cuda]

Measures the GPU's fp32 peak with an FMA loop and an 8192^3 SGEMM, beside its datasheet figure.

options:
  --device cuda       the GPU (the default when one is present; the CPU has no such peak here)
)";

const char* const kCopybenchUsage = R"(usage: loupe copybench [options]

Host-to-device bandwidth from pinned and from pageable memory, for one loader slot of mnist_mlp
and for 64 MiB.

options:
  --batch N           the slot's batch size (default 128)
  --device cuda       the GPU (the default when one is present)
)";

const char* const kProfileUsage = R"(usage: loupe profile MODEL [options]

Trains MODEL for one short epoch (eagerly, unless --graph) and, for the window of global steps A..B (default
20:39, after the warm-up), prints per module, op and phase (forward, backward, optimizer): calls
and GPU time per step (CUPTI's kernel records joined to the op that launched them), share of the
GPU's busy time, analytic FLOPs and bytes, achieved TFLOP/s and GB/s, the percentage of the
ceiling that bounds it (a GEMM and a device copy measured here first, at the precision in use),
and whether it is compute-, memory- or latency-bound; then the step's idle time and the three
rows most worth working on. On the CPU an op's time is the host time inside it.

options:
  --profile-steps A:B the window (default 20:39; the epoch must have B steps)
  --csv FILE          the table as CSV (default profile-MODEL.csv)
  --json FILE         the table and summary as JSON
  --png FILE          the roofline plot: one point per row, sized by its share (default profile-MODEL.png)
  --counters          also read each kernel's hardware counters (CUPTI's range profiler, kernel
                      replay) in one more step after the window: FP32 FMA pipe, tensor pipe and DRAM
                      throughput in percent of peak, per row and time-weighted over the step
  --graph auto|on|off off (default): the eager step; on or auto: the step as loupe train runs it,
                      one CUDA graph replayed, each kernel tied to the op that captured it through
                      its graph node (CUPTI), and the gaps between kernels as boundary time
  --device cpu|cuda   where to train (default: cuda when a GPU is present)
  --batch N           batch size (default: the recipe's)
  --lr X              learning rate
  --optimizer NAME    adam, rmsprop, sgd or adadelta (as loupe train)
  --loss NAME         the loss, as Keras names it (as loupe train)
  --precision P       fp32, tf32, fp16 or bf16 (as loupe train)
  --channels-last     convolutions in NHWC
  --data DIR          the model's data set (as loupe train)
  --val-split F       NumPy arrays without test arrays: the last F of the training ones (as train)
  --synthetic [KIND]  data of the model's shapes, generated once
  --resident          the whole training set on the device (no loader copies in the window)
  --workers N         loader threads (default 4)
  --prefetch K        loader batches in flight (default 4)
  --pin-memory on|off page-locked loader slots (default on)
  --threads N         CPU threads
  --seed N            seed (default 1)
  --no-nvml           do not sample NVML
)";

}  // namespace

const char* usage(const std::string& command) {
  static const std::map<std::string, const char*> kHelp{
      {"train", kTrainUsage}, {"eval", kEvalUsage},         {"generate", kGenerateUsage},
      {"bench", kBenchUsage}, {"sweep", kSweepUsage},       {"roofline", kRooflineUsage},
      {"models", kModelsUsage}, {"peak", kPeakUsage},       {"copybench", kCopybenchUsage},
      {"profile", kProfileUsage}, {"compare", kCompareUsage}};
  auto it = kHelp.find(command);
  return it == kHelp.end() ? kUsage : it->second;
}

namespace {

// Every numeric option and the values it takes (cli/cli_numbers.h parses them; a value outside
// is refused before any data is loaded). The bounds are what the code can carry: counts that are
// narrowed to int, sizes that are multiplied into allocations, threads that are started.
constexpr int64_t kMaxSteps = 1000000000000;  // global step numbers (int64 counters)

int64_t in(const std::string& v, const char* flag, int64_t lo, int64_t hi) { return parse_int(v, flag, lo, hi); }
double above(const std::string& v, const char* flag, double lo, double hi) { return parse_double(v, flag, lo, hi); }

bool is_list_command(const std::string& c) { return c == "bench" || c == "sweep"; }

// --profile-steps A:B, 1 <= A <= B.
std::pair<int64_t, int64_t> profile_window(const std::string& ps) {
  size_t colon = ps.find(':');
  if (colon == std::string::npos)
    throw Error("--profile-steps needs A:B with 1 <= A <= B (global step numbers), got '" + ps + "'");
  int64_t a = parse_int(ps.substr(0, colon), "--profile-steps A", 1, kMaxSteps);
  return {a, parse_int(ps.substr(colon + 1), "--profile-steps B", a, kMaxSteps)};
}

using Setter = std::function<void(Options&, const std::string&)>;
struct Spec {
  bool flag;             // takes no value (--synthetic also takes one: --synthetic=KIND)
  const char* commands;  // the subcommands that take it, space-separated
  Setter set;
};

constexpr const char* kWhere = "train eval generate bench sweep peak roofline copybench profile";
constexpr const char* kBench = "bench sweep";

// Each option: whether it is a flag, who takes it, and how its value is parsed and stored.
const std::map<std::string, Spec> kSpecs = {
    {"device", {false, kWhere, [](Options& o, const std::string& v) {
       if (v.empty())  // it meant the default silently
         throw Error("--device needs cpu, cuda or cuda:N, got an empty value (leave --device out for the default)");
       o.device = v;
     }}},
    {"data", {false, "train eval generate profile", [](Options& o, const std::string& v) { o.data = v; }}},
    {"synthetic", {true, "train eval generate profile", [](Options& o, const std::string& v) {
       o.synthetic = true;
       if (v != "1") o.synthetic_kind = data::parse_synthetic_kind(v);
     }}},
    {"precision", {false, "train eval generate bench sweep profile", [](Options& o, const std::string& v) {
       if (!is_list_command(o.command)) {
         o.precision = {parse_precision(v)};
         return;
       }
       o.precision.clear();
       for (const std::string& p : parse_list(v)) o.precision.push_back(parse_precision(p));
     }}},
    {"graph", {false, "train eval bench sweep profile", [](Options& o, const std::string& v) { o.graph = train::parse_graph_mode(v); }}},
    {"threads", {false, "train bench sweep profile", [](Options& o, const std::string& v) { o.threads = int(in(v, "--threads", 1, 1024)); }}},
    {"seed", {false, "train generate bench sweep profile", [](Options& o, const std::string& v) { o.seed = uint64_t(in(v, "--seed", 0, INT64_MAX)); }}},
    {"checkpoint", {false, "eval generate", [](Options& o, const std::string& v) { o.checkpoint = v; }}},
    {"epochs", {false, "train bench", [](Options& o, const std::string& v) { o.epochs = int(in(v, "--epochs", 1, 1000000)); }}},
    {"batch", {false, "train copybench bench sweep profile", [](Options& o, const std::string& v) {
       if (is_list_command(o.command)) o.batch = parse_int_list(v, "--batch", 1, 1 << 20);
       else o.batch = {in(v, "--batch", 1, 1 << 20)};
     }}},
    {"lr", {false, "train profile", [](Options& o, const std::string& v) { o.lr = above(v, "--lr", 0, 1000); }}},
    {"optimizer", {false, "train profile", [](Options& o, const std::string& v) {
       models::with_optimizer(models::Recipe{}, v);  // an unknown name is refused here, before any work
       o.optimizer = v;
     }}},
    {"loss", {false, "train profile eval bench sweep", [](Options& o, const std::string& v) {
       models::check_loss_name(v);  // an unknown name is refused here, before any work
       o.loss = v;
     }}},
    {"max-steps", {false, "train", [](Options& o, const std::string& v) { o.max_steps = in(v, "--max-steps", 1, kMaxSteps); }}},
    {"target-acc", {false, "train", [](Options& o, const std::string& v) { o.target_acc = run::parse_target(v); }}},
    {"seeds", {false, "train", [](Options& o, const std::string& v) { o.seeds = int(in(v, "--seeds", 1, 1000)); }}},
    {"workers", {false, "train profile", [](Options& o, const std::string& v) { o.workers = int(in(v, "--workers", 1, 256)); }}},
    {"prefetch", {false, "train profile", [](Options& o, const std::string& v) { o.prefetch = int(in(v, "--prefetch", 1, 64)); }}},
    {"pin-memory", {false, "train profile", [](Options& o, const std::string& v) {
       if (v != "on" && v != "off") throw Error("--pin-memory takes on or off, got '" + v + "'");
       o.pin_memory = v == "on";
     }}},
    {"drop-last", {true, "train", [](Options& o, const std::string&) { o.drop_last = true; }}},
    {"resident", {true, "train profile", [](Options& o, const std::string&) { o.resident = true; }}},
    {"val-split", {false, "train eval profile", [](Options& o, const std::string& v) {
       o.val_split = above(v, "--val-split", 0, 0.9);
     }}},
    {"channels-last", {true, "train bench sweep profile", [](Options& o, const std::string&) { o.channels_last = true; }}},
    {"save", {false, "train", [](Options& o, const std::string& v) { o.save = v; }}},
    {"save-keras", {false, "train", [](Options& o, const std::string& v) {
       if (!models::is_keras_archive(v)) throw Error("--save-keras '" + v + "': Keras 3's model files end in .keras");
       o.save_keras = v;
     }}},
    {"save-best", {true, "train", [](Options& o, const std::string&) { o.save_best = true; }}},
    {"lr-schedule", {false, "train", [](Options& o, const std::string& v) {
       if (train::is_plateau(v)) train::parse_plateau(v);  // refused here, before any work
       else train::parse_lr_schedule(v, 1e-3);
       o.lr_schedule = v;
     }}},
    {"early-stop", {false, "train", [](Options& o, const std::string& v) {
       run::parse_early_stop(v);
       o.early_stop = v;
     }}},
    {"resume", {false, "train", [](Options& o, const std::string& v) { o.resume = v; }}},
    {"weights", {false, "train eval", [](Options& o, const std::string& v) { o.weights = v; }}},
    {"metrics", {false, "train", [](Options& o, const std::string& v) { o.metrics = v; }}},
    {"tensorboard", {false, "train", [](Options& o, const std::string& v) {
       if (v.empty()) throw Error("--tensorboard needs a directory for the event files, e.g. --tensorboard runs/mlp");
       o.tensorboard = v;
     }}},
    {"csv", {false, "train bench sweep roofline compare profile", [](Options& o, const std::string& v) { o.csv = v; }}},
    {"json", {false, "bench sweep profile", [](Options& o, const std::string& v) { o.json = v; }}},
    {"png", {false, "sweep roofline profile", [](Options& o, const std::string& v) { o.png = v; }}},
    {"trace", {false, "train", [](Options& o, const std::string& v) { o.trace = v; }}},
    {"timeline", {false, "train", [](Options& o, const std::string& v) { o.timeline = v; }}},
    {"sample-ms", {false, "train", [](Options& o, const std::string& v) { o.sample_ms = int(in(v, "--sample-ms", 1, 60000)); }}},
    {"labels", {false, "compare", [](Options& o, const std::string& v) { o.labels = parse_list(v); }}},
    {"plot", {false, "compare", [](Options& o, const std::string& v) { o.plot = v; }}},
    {"profile-steps", {false, "train profile", [](Options& o, const std::string& v) { o.profile_steps = profile_window(v); }}},
    {"price-per-hour", {false, "train bench sweep compare", [](Options& o, const std::string& v) {
       o.price_per_hour.clear();
       if (o.command != "compare") o.price_per_hour = {above(v, "--price-per-hour", 0, 1e6)};
       else for (const std::string& p : parse_list(v)) o.price_per_hour.push_back(above(p, "--price-per-hour", 0, 1e6));
     }}},
    {"counters", {true, "profile", [](Options& o, const std::string&) { o.counters = true; }}},
    {"busy", {true, "train bench sweep", [](Options& o, const std::string&) { o.busy = true; }}},
    {"no-nvml", {true, "train bench sweep profile", [](Options& o, const std::string&) { o.nvml = false; }}},
    {"plain", {true, "train", [](Options& o, const std::string&) { o.plain = true; }}},
    {"gpus", {false, "train bench", [](Options& o, const std::string& v) {
       o.gpus.clear();
       if (o.command != "bench") o.gpus = {int(in(v, "--gpus", 1, 64))};
       else for (int64_t g : parse_int_list(v, "--gpus", 1, 64)) o.gpus.push_back(int(g));
     }}},
    {"nnodes", {false, "train", [](Options& o, const std::string& v) { o.nnodes = int(in(v, "--nnodes", 1, 4096)); }}},
    {"node-rank", {false, "train", [](Options& o, const std::string& v) { o.node_rank = int(in(v, "--node-rank", 0, 4095)); }}},
    {"master", {false, "train", [](Options& o, const std::string& v) { o.master = v; }}},
    {"baseline", {false, "train", [](Options& o, const std::string& v) { o.baseline = above(v, "--baseline", 0, 1e12); }}},
    {"prompt", {false, "generate", [](Options& o, const std::string& v) { o.prompt = v; }}},
    {"length", {false, "generate", [](Options& o, const std::string& v) { o.length = in(v, "--length", 1, 1000000); }}},
    {"temperature", {false, "generate", [](Options& o, const std::string& v) {
       o.temperature = above(v, "--temperature", 0, 1000);
     }}},
    {"steps", {false, kBench, [](Options& o, const std::string& v) { o.steps = in(v, "--steps", 1, 1000000); }}},
    {"warmup", {false, kBench, [](Options& o, const std::string& v) { o.warmup = in(v, "--warmup", 0, 1000000); }}},
    {"rounds", {false, kBench, [](Options& o, const std::string& v) { o.rounds = int(in(v, "--rounds", 1, 1000)); }}},
    {"min-seconds", {false, "bench sweep roofline", [](Options& o, const std::string& v) {
       o.min_seconds = above(v, "--min-seconds", 0, 3600);
     }}},
    {"sizes", {false, "roofline", [](Options& o, const std::string& v) {
       o.sizes = parse_int_list(v, "--sizes", 1, 65536);  // cli/roofline/roofline.cpp's bound
     }}},
};

const std::set<std::string> kCommands{"train", "eval",     "generate",  "bench",   "sweep",   "models",
                                      "peak",  "roofline", "copybench", "profile", "compare", "help"};

bool takes(const Spec& s, const std::string& command) {
  const std::string list = std::string(" ") + s.commands + " ";
  return list.find(" " + command + " ") != std::string::npos;
}

// One word of the command line that is not an option: the command, then the model. `after_dashes`:
// the word came after `--`, where a word that looks like an option is a positional all the same.
void positional(Options& o, const std::string& s, bool after_dashes = false) {
  if (o.command.empty()) o.command = s;
  else if (o.command == "compare") o.files.push_back(s);
  else if (o.model.empty()) o.model = s;
  else if (after_dashes)
    throw Error("unexpected argument '" + shown_value(s) + "': loupe " + o.command + " takes one model and it is '" +
                shown_value(o.model) + "' (every word after -- is a positional; options go before it)");
  else throw Error("unexpected argument '" + shown_value(s) + "' (see loupe --help)");
}

// Paths given as empty strings (--data "" used to mean the default silently), and outputs that
// name the same file (--save X --metrics X: the checkpoint's rename took the metrics' place).
void check_paths(const Options& o, const std::vector<std::pair<std::string, std::string>>& given) {
  static const std::set<std::string> kPaths{"data", "checkpoint", "save", "save-keras", "resume", "weights", "metrics", "tensorboard", "csv",
                                            "json", "png", "trace", "timeline"};
  for (const auto& [key, val] : given)
    if (kPaths.count(key) && val.empty()) throw Error("--" + key + " needs a path, got an empty one");
  const std::pair<const char*, const std::string*> outputs[] = {
      {"save", &o.save}, {"save-keras", &o.save_keras}, {"metrics", &o.metrics}, {"csv", &o.csv}, {"trace", &o.trace}, {"timeline", &o.timeline}};
  std::map<std::string, const char*> seen;
  for (const auto& [name, path] : outputs) {
    if (path->empty()) continue;
    std::error_code ec;
    const std::string key = std::filesystem::weakly_canonical(*path, ec).string();
    const auto [it, fresh] = seen.emplace(ec ? *path : key, name);
    if (!fresh)
      throw Error("--" + std::string(it->second) + " and --" + name + " name the same file '" + *path +
                  "': give each output a file of its own");
  }
}

}  // namespace

std::vector<std::string> options_of(const std::string& command) {
  std::vector<std::string> names;
  for (const auto& [name, spec] : kSpecs)
    if (takes(spec, command)) names.push_back(name);
  return names;
}

std::string nearest(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 3;
  for (const std::string& k : known) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(k.size() + 1);
    for (size_t j = 0; j <= k.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= k.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] == k[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    const size_t d = word.size() >= 2 && k.rfind(word, 0) == 0 ? 1 : row[k.size()];
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string unknown_command(const std::string& command) {
  std::vector<std::string> known(kCommands.begin(), kCommands.end());
  const std::string near = nearest(command, known);
  return "unknown command '" + command + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
         " (see loupe --help)";
}

namespace {
// An option no subcommand knows, with the nearest that this one takes (any, before the command).
std::string unknown_option(const std::string& key, const std::string& command) {
  std::vector<std::string> known;
  for (const auto& [name, spec] : kSpecs)
    if (command.empty() || !kCommands.count(command) || takes(spec, command)) known.push_back(name);
  const std::string near = nearest(key, known);
  return "unknown option --" + key + (near.empty() ? "" : "; did you mean --" + near + "?") + " (see loupe " +
         (command.empty() ? "" : command + " ") + "--help)";
}

// The short forms: the ecosystem's (PyTorch's examples: -b batch, -j workers) and -e.
const std::map<std::string, char> kShort{{"batch", 'b'}, {"epochs", 'e'}, {"workers", 'j'}};

// The command line as CLI11 gets it, and what loupe keeps for itself.
struct Words {
  std::vector<std::string> cli11;         // the words before `--`, for CLI11
  std::vector<std::string> after_dashes;  // the words after `--`: positionals, whatever they look like
  std::map<std::string, bool> with_equals;  // by option: whether its last value was given as --X=VALUE
};

// argv for CLI11, with two of loupe's conventions spelt its way: `--synthetic KIND` as
// `--synthetic=KIND` (a flag that may take a value), and `--X=` (an empty value, which CLI11
// reads as none) as `--X ""`, so that the empty path is refused by name. The first `--` ends the
// options, as in CLI11 and getopt: CLI11 never sees it or what follows (docs/cli.md, "Values").
Words cli11_words(int argc, char** argv) {
  Words words;
  std::vector<std::string>& w = words.cli11;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--") {
      words.after_dashes.assign(argv + i + 1, argv + argc);
      break;
    }
    if (s.size() > 2 && s.rfind("--", 0) == 0 && s[2] != '-')
      words.with_equals[s.substr(2, s.find('=') - 2)] = s.find('=') != std::string::npos;
    if (s == "--synthetic" && i + 1 < argc && (std::string(argv[i + 1]) == "random" || std::string(argv[i + 1]) == "learnable")) {
      w.push_back(s + "=" + argv[++i]);
    } else if (s.size() > 3 && s.rfind("--", 0) == 0 && s.back() == '=') {
      w.push_back(s.substr(0, s.size() - 1));
      w.emplace_back();
    } else {
      w.push_back(s);
    }
  }
  return words;
}

// Every option on the named subcommand, so that CLI11 reads each as a flag or as taking a value
// wherever it stands; which options the subcommand takes is loupe's check after the parse (one that
// another subcommand takes is refused by name, not as unknown).
struct Parsed {
  std::map<std::string, std::pair<CLI::Option*, std::string>> options;  // by name: CLI11's, its value
  std::vector<std::string> words;                                      // the subcommand's positionals
};

void declare(CLI::App& sub, Parsed& p) {
  sub.fallthrough();  // -h and -V after the subcommand reach the app's flags
  sub.allow_extras();
  sub.set_help_flag();
  sub.add_option("words", p.words);
  for (const auto& [name, spec] : kSpecs) {
    auto& [opt, value] = p.options[name];
    std::string names = "--" + name;
    if (auto sh = kShort.find(name); sh != kShort.end()) names = std::string("-") + sh->second + "," + names;
    if (name == "synthetic") opt = sub.add_flag(names + "{1}", value);  // --synthetic[=KIND]
    else if (spec.flag) opt = sub.add_flag(names);
    else opt = sub.add_option(names, value);
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last of a repeated option wins
  }
}

// "--epochs: 1 required TEXT missing" -> "epochs".
std::string option_in(const std::string& message) {
  const size_t at = message.find("--");
  if (at == std::string::npos) return "";
  size_t end = at + 2;
  while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-')) ++end;
  return message.substr(at + 2, end - at - 2);
}

// A value that is itself an option: `--save --metrics` gave --save the value "--metrics" (CLI11 takes
// the next word whatever it is); `--save=--metrics` says it is meant. A negative number has one dash.
void check_values(const std::vector<std::pair<std::string, std::string>>& given, const Words& words) {
  for (const auto& [key, val] : given) {
    if (kSpecs.at(key).flag || val.rfind("--", 0) != 0) continue;
    const auto eq = words.with_equals.find(key);
    if (eq != words.with_equals.end() && eq->second) continue;
    const std::string v = shown_value(val);
    throw UsageError("--" + key + " needs a value, got the option '" + v +
                     "'; a path that starts with -- is written --" + key + "=" + v + " or ./" + v);
  }
}

// The command line parsed by CLI11 into (option, value) pairs in kSpecs' order and the positionals.
std::vector<std::pair<std::string, std::string>> parse_cli11(Options& o, const Words& all) {
  const std::vector<std::string>& words = all.cli11;
  if (!words.empty() && words[0] == "help") {  // `loupe help COMMAND`: the COMMAND is a word, not a subcommand
    for (const std::string& w : words) positional(o, w);
    for (const std::string& w : all.after_dashes) positional(o, w, true);
    return {};
  }
  // Options before the command (`loupe --device cpu train mnist_mlp`) are the command's: CLI11 reads
  // a subcommand's options after it, so the command goes first. Only that subcommand is declared;
  // a word that is no command stays a positional, for main's "unknown command".
  std::vector<std::string> ordered = words;
  const auto cmd = std::find_if(ordered.begin(), ordered.end(), [](const std::string& w) { return kCommands.count(w) > 0; });
  const std::string command = cmd == ordered.end() ? "" : *cmd;
  if (cmd != ordered.end()) std::rotate(ordered.begin(), cmd, cmd + 1);
  CLI::App app{"loupe"};
  app.set_help_flag();
  app.allow_extras();
  app.add_flag("-h,--help", o.help);
  app.add_flag("-V,--version", o.version);
  Parsed parsed;
  CLI::App* sub = command.empty() ? nullptr : app.add_subcommand(command);
  if (sub) declare(*sub, parsed);
  std::vector<std::string> reversed(ordered.rbegin(), ordered.rend());  // CLI11 takes the words last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {  // a missing value; CLI11's other refusals, in its words
    const std::string name = option_in(e.what());
    const std::string see = " (see loupe " + (command.empty() ? "" : command + " ") + "--help)";
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && !name.empty())
      throw UsageError("option --" + name + " needs a value" + see);
    throw UsageError(std::string(e.what()) + see);
  }
  for (const std::string& extra : app.remaining(true)) {
    if (extra.rfind("-", 0) == 0 && extra.size() > 1) {  // an option CLI11 did not know
      const size_t from = extra.find_first_not_of('-');
      const std::string key = from == std::string::npos ? extra : extra.substr(from, extra.find('=') - from);
      throw UsageError(unknown_option(shown_value(key), command));
    }
    positional(o, extra);  // the command CLI11 did not know ("unknown command", main says)
  }
  std::vector<std::pair<std::string, std::string>> given;
  if (sub) {
    o.command = command;
    for (const auto& [name, opt] : parsed.options)
      if (opt.first->count() > 0)
        given.emplace_back(name, kSpecs.at(name).flag && name != "synthetic" ? "1" : opt.second);
    if (!o.help && !o.version) check_values(given, all);  // before the positionals: a value taken is one fewer
  }
  for (const std::string& w : parsed.words) positional(o, w);
  for (const std::string& w : all.after_dashes) positional(o, w, true);
  return given;
}

Options parse_words(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) o.args.push_back(argv[i]);
  const Words words = cli11_words(argc, argv);
  const std::vector<std::pair<std::string, std::string>> given = parse_cli11(o, words);
  if (o.help || o.version || !kCommands.count(o.command)) return o;  // the usage, or "unknown command"
  for (const auto& [key, val] : given) {
    const Spec& spec = kSpecs.at(key);
    if (!takes(spec, o.command))
      throw UsageError("loupe " + o.command + " does not take --" + key + " (see loupe " + o.command + " --help)");
    spec.set(o, val);
    o.given.insert(key);
  }
  check_paths(o, given);
  if (!o.trace.empty() && !o.has("profile-steps")) o.profile_steps = profile_window("10:19");
  if (o.save_best && o.save.empty())
    throw Error("--save-best keeps the best epoch in --save's file: give --save PATH too");
  if (o.has("seeds") && !o.target_acc)
    throw Error("--seeds repeats a run to a target accuracy over seeds: give --target-acc A too");
  if (o.target_acc && (o.gpu_count() > 1 || o.nnodes > 1))
    throw Error("--target-acc times one process's run; a data-parallel run (--gpus, --nnodes) is not timed to a target yet");
  if (o.seeds > 1 && (!o.save.empty() || !o.resume.empty() || !o.save_keras.empty()))
    throw Error("--seeds " + std::to_string(o.seeds) + " makes " + std::to_string(o.seeds) +
                " runs: --save, --save-keras and --resume name one run's files");
  if (o.node_rank >= o.nnodes)
    throw Error("--node-rank " + std::to_string(o.node_rank) + " is outside --nnodes " + std::to_string(o.nnodes) +
                ": hosts are numbered from 0");
  return o;
}
}  // namespace

Options parse_options(int argc, char** argv) {
  try {
    return parse_words(argc, argv);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a value the option cannot take (a range, a choice, a path)
    throw UsageError(e.what());
  }
}

}  // namespace loupe::cli
