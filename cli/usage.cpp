// What `loupe --help` and `loupe COMMAND --help` print (cli/options.h); docs/cli.md is generated
// from them (tests/check_docs.py), and a test checks that each names every option its command takes.
#include <map>
#include <string>

#include "cli/options.h"

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
  loupe tune MODEL [train's options] [--objective speed|energy]
                                  try what the advice suggests and a grid around the recipe (batch,
                                  precision, feed, threads), a short measured stretch each: a table
                                  of the gains, the best command line, the advice's measured worth
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

data parallelism (NCCL; docs/multi-gpu.md):
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
    "\ndata parallelism (NCCL):\n"
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
each checked against float64. Written as CSV and plotted (docs/performance.md, "The matrix-vector
roofline").

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

const char* const kTuneUsage = R"(usage: loupe tune MODEL [options]

Measures what `loupe train MODEL [options]` would gain from each change its advice suggests and from a
small grid around it: precision (bf16, fp16, tf32 on a GPU), two and four times the batch (at the
learning rate linear scaling gives it), the data resident on the device, twice the loader's workers
and prefetch, fewer CPU threads. Each row is that run, warmed up, then timed for S seconds of steps
in epochs as `loupe train` runs them, in a loupe process of its own (one row's algorithm search
cannot slow the next); R rounds in turn, the recipe in each, every row its median round (a rerun is
a typical round, not the luckiest). Then the best change of each kind together. Prints samples/s,
the gain over the recipe, ms/step, samples/J, NVML utilisation and SM activity (the CPU: threads and their wait for a core), the best
command line, and each piece of the recipe's advice with the gains measured for it.

options: MODEL and train's --data, --synthetic, --device, --batch, --precision, --lr, --optimizer,
--loss, --workers, --prefetch, --pin-memory, --resident, --val-split, --channels-last, --threads,
--graph, --seed and --no-nvml give the run that is tuned (default: the recipe), and
  --objective O       speed (samples/s, default) or energy (samples/J; a GPU's energy counter)
  --min-seconds S     each row's timed stretch (default 2 on a GPU, 1 on the CPU)
  --rounds R          measure every row R times in turn (default 2 on a GPU, 3 on the CPU)
  --recipe-only       measure the recipe's row alone (its steady speed; no grid)
  --metrics FILE      append each row's median report to FILE, one JSON line per row in the
                      table's order (the fields of train's --metrics)

example: loupe tune mnist_mlp --data /usr/share/datasets/fashion-mnist
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
  --predict GPU       the step predicted on another GPU (H100, H200, A100, L4, ...): each row at
                      that GPU's datasheet peak and bandwidth, its efficiency held; the gaps kept
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
      {"profile", kProfileUsage}, {"compare", kCompareUsage}, {"tune", kTuneUsage}};
  auto it = kHelp.find(command);
  return it == kHelp.end() ? kUsage : it->second;
}

}  // namespace loupe::cli
