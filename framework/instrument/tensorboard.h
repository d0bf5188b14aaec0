// TensorBoard event files (loupe train --tensorboard DIR): scalars as TensorBoard's own Event protos
// (third_party/tensorboard_proto, compiled by protoc at build time), framed as TFRecords: per record
// the length as a little-endian uint64, the masked CRC32C of those 8 bytes, the bytes, and their
// masked CRC32C (Boost.CRC; mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8). The first record is
// the file version, "brain.Event:2". `tensorboard --logdir DIR` shows the scalars.
//
// Built where CMake finds protobuf (loupe: TensorBoard: ON); elsewhere tensorboard_none.cpp stands
// in: tensorboard_available() is false and the writer's constructor throws tensorboard_missing().
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "instrument/nvml_sampler.h"
#include "instrument/report.h"

namespace loupe::instrument {

// Whether this build writes TensorBoard event files.
bool tensorboard_available();
// One sentence: this build cannot write them, and which packages to install before rebuilding.
std::string tensorboard_missing();

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) where missing and opens a new event file in it,
  // events.out.tfevents.<unix seconds>.<hostname>.<pid>.loupe, starting with the version record;
  // the same in dir/train and dir/test (the accuracy overlay, see epoch()).
  // Throws loupe::Error naming the path when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();  // flushes and closes (never throws)
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  const std::string& path() const;

  // One Event at `step` holding each (tag, value) as a scalar (Summary.Value.simple_value, a float).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // One Event at `step` holding `markdown` as TensorBoard's text plugin reads it (a string tensor
  // with plugin "text"): its Text tab shows it, tables rendered.
  void text(int64_t step, const std::string& tag, const std::string& markdown);
  // The run's hyperparameters (model, precision, batch, lr, epochs, seed, threads, GPUs, device) as
  // the HParams plugin's session start ("_hparams_/session_start_info"): TensorBoard's HParams tab
  // lists the run with them beside its metrics. epoch() writes it at the first epoch.
  void hparams(const EpochReport& r);

  // The per-step points, from the step_end observer point (run/report.h). begin_epoch marks the
  // start of an epoch's training (host seconds). step() writes one Event at global step `step` only when `loss`, the
  // running mean loss, is new since its last call (the trainer reads it from the device about
  // every 0.2 s, without waiting): "step/loss", and "step/samples_per_sec" over the samples of
  // this epoch and the seconds since the last point (or the epoch's start). Otherwise it only
  // compares: no per-step cost, and never a device read. The loss is the epoch's mean up to the
  // step at which the trainer asked for it (on a GPU a few steps before `step`, as it arrives).
  void begin_epoch(double now_s);
  void step(int64_t step, int64_t epoch_samples, double now_s, std::optional<double> loss);

  // Every numeric field of the epoch report that the JSON line holds as a number (numeric_fields
  // in report_io.h: unmeasured and non-finite ones are left out, never written as 0), each as
  // "epoch/<field>" at step r.epoch, but the run's constants (batch, epochs, seed, lr, threads,
  // world size, the peak, ...): those, with the model, device and precision, go once, at the first
  // epoch, into the text "run/config" (a table) and hparams(), never as flat charts. Train and test accuracy
  // also go, as "epoch/accuracy", into the runs DIR/train and DIR/test, which TensorBoard draws on
  // one chart. Then flushes the files, so a killed run keeps its epochs.
  void epoch(const EpochReport& r);
  // The GPU over time, as the timeline's NVML samples (new ones since the last call): per sample
  // one Event, its wall time the sample's (`steady_now` is NvmlSampler::now() at the call, to turn
  // the samples' clock into wall time), its step the sample's number in the run, with
  // "gpu/util_pct", "gpu/mem_used_gib", "gpu/power_w" (where NVML reports power), "gpu/temp_c" and
  // "gpu/sm_clock_mhz".
  void gpu_samples(const std::vector<GpuSample>& samples, double steady_now);
  void flush();

  struct Impl;  // one run's event file (tensorboard.cpp)

 private:
  std::unique_ptr<Impl> impl_, train_, test_;  // DIR, DIR/train, DIR/test
  bool config_written_ = false;
  int64_t gpu_samples_ = 0;  // written so far: the next one's step
  double last_time_ = 0;
  int64_t last_samples_ = 0;
  std::optional<double> last_loss_;
};

}  // namespace loupe::instrument
