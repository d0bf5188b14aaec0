// The epoch report: one record per epoch with every figure loupe measures. A figure that could not
// be measured here is an empty optional, printed as "n/a" and written as JSON null, never 0
// (docs/design.md principle 5); the *_why fields say why.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/precision.h"

namespace loupe::instrument {

using Opt = std::optional<double>;

struct EpochReport {
  // Which run (instrument/run_stamp.h: every record of one process alike), its seed, learning rate
  // and CPU threads (null where the run has none: bench's seed), and the host's CPU.
  std::string run_id, started_at;
  std::optional<uint64_t> seed;  // exact: a double would round seeds past 2^53
  Opt lr;
  int threads = 0;
  std::string cpu_model;
  // What ran.
  std::string model, device, device_name;
  Precision precision = Precision::FP32;
  int64_t batch = 0;
  int epoch = 0, epochs = 0;
  int64_t steps = 0, samples = 0;

  // Learning.
  double train_loss = 0, train_acc = 0;
  Opt test_acc, test_loss;
  // fp16's dynamic loss scaling: the scale at the epoch's end and the steps skipped in it for an
  // overflowed gradient (null without a loss scaler: fp32, tf32, bf16).
  Opt loss_scale, skipped_steps;

  // Time (host wall clock).
  double epoch_seconds = 0, train_seconds = 0, eval_seconds = 0;
  double samples_per_sec = 0;
  Opt step_ms_p50, step_ms_p95;              // wall time per step
  Opt issue_ms_p50, issue_ms_p95;            // host time to issue a step's work (enqueue only)
  Opt data_wait_ms_p50, data_wait_ms_p95;    // time the step waited for its batch
  Opt data_wait_share;                       // data wait / train wall time, 0..1
  // The time the step waited for a loader slot the GPU still held (the host ahead of a busy GPU:
  // back-pressure, not data; loader::Batch::gpu_wait_ms), over train wall time; not in the above.
  Opt data_gpu_wait_share;
  // How the steps ran: replayed from one CUDA graph (train/trainer.h) or issued from the host.
  Opt graph_steps;                           // steps replayed from the graph (0: all eager)
  Opt graph_kernels;                         // kernels in the step's graph (null: no graph)
  std::string graph_why;                     // why steps ran eagerly ("" when the full batches were graphed)

  // Arithmetic (FLOPs counted analytically per op).
  Opt flops_per_sample;                      // forward + backward + update, per training sample
  Opt achieved_tflops;                       // over the training wall time
  Opt peak_tflops;                           // of the device at this precision
  std::string peak_source;                   // "table: NVIDIA H200 fp32", "measured (loupe peak)", ...
  Opt mfu;                                   // achieved / peak, 0..1

  // GPU, sampled by NVML every `nvml_period_ms`.
  int nvml_samples = 0;
  std::string nvml_why;                      // why the NVML fields are empty, when they are
  Opt gpu_util_mean, gpu_util_max;           // percent
  Opt mem_util_mean;                         // memory-controller utilisation, percent
  Opt mem_used_max_bytes, mem_total_bytes;   // device memory per NVML (all processes)
  Opt power_mean_w, power_max_w;
  Opt energy_j;                              // over the epoch, from the energy counter
  Opt samples_per_joule;
  Opt temp_max_c, sm_clock_mean_mhz;
  std::string throttle;                      // throttle reasons seen during the epoch, "" if none
  // What the SMs did, from NVML's GPM (Hopper and newer), percent over the epoch: SMs with a warp
  // resident (NVML's utilisation counts a period busy if any kernel ran at all), warps resident
  // against the most the SMs hold, any tensor pipe active, DRAM bandwidth used against its peak,
  // any engine active. gpm_why says why they are null.
  Opt gpu_sm_active, gpu_sm_occupancy, gpu_tensor_active, gpu_dram_active, gpu_graphics_active;
  std::string gpm_why;

  // GPU busy time from CUPTI activity records (--busy): union of kernel and copy intervals.
  Opt gpu_busy_share;                        // busy / train wall time, 0..1
  // The same window's gaps shorter than 5 us between two stretches of the GPU's work (kernel
  // boundaries: instrument/intervals.h, split_time), over train wall time; the rest is idle. And
  // the kernels the GPU ran per training step (a graphed step's kernel count, plus eager steps').
  Opt gpu_boundary_share, gpu_kernels_per_step;
  std::string busy_why;

  // Memory from loupe's allocator (the stream-ordered pool), plus the CUDA graphs' own memory.
  Opt alloc_peak_bytes;

  // The host process, from /proc.
  Opt host_cpu_util;                         // process CPU seconds / wall seconds (1.0 = one core)
  Opt host_rss_bytes;
  Opt host_cpu_wait_share;  // of the time the threads were ready to run, the share they waited for a core

  // Cost, with --price-per-hour.
  Opt cost_epoch, cost_per_million_samples;

  // Data parallelism (--gpus): this record's rank and the world's size (0 and 1 for one process);
  // the world's samples/s (every rank's samples over the slowest rank's training time), that
  // against world_size times --baseline (one GPU's samples/s at this per-GPU batch), and the
  // gradient bytes each rank all-reduces per step. With --busy (CUPTI): the share of the training
  // time in which NCCL's kernels ran, the share in which nothing else did (communication the
  // backward pass did not hide), and the all-reduces' bus bandwidth (NCCL's busbw: bytes x
  // 2(W-1)/W over the time in NCCL kernels), in GB/s.
  int rank = 0, world_size = 1;
  Opt world_samples_per_sec, scaling_efficiency, allreduce_bytes_per_step;
  Opt nccl_share, nccl_exposed_share, bus_gbps;
  // The rank the others wait for (instrument/straggler.h; null: one process, or not judged from the
  // figures measured) and how much more of the time the others waited for it: with --busy their
  // median unhidden NCCL share less its own, else its data wait beyond theirs over its step.
  Opt slowest_rank, straggler_share;

  std::vector<std::string> advice;
};

}  // namespace loupe::instrument
