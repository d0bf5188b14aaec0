// The asynchronous data loader (Caffe's prefetching data layer; docs/design.md, principle 3):
// worker threads collate batches, with augmentation, straight into a ring of K pinned host slots;
// each filled slot is copied to its device slot on a separate copy stream and an event marks it
// ready; the training step makes the compute stream wait on that event (the host never waits for
// the copy), and a slot is refilled only after the step that read it has finished on the GPU
// (another event). On the CPU the same loader runs with ordinary memory and no copies.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "loader/dataset.h"
#include "loader/sampler.h"

namespace loupe::loader {

struct LoaderOptions {
  int64_t batch = 128;
  int workers = 4;        // collating threads
  int prefetch = 4;       // K: slots in the ring
  bool pin_memory = true; // page-locked host slots (only with CUDA)
  bool drop_last = false;
  bool shuffle = true;
  uint64_t seed = 1;
  Device device = kCPU;
  // This process's part of each global step (docs/multi-gpu.md). With world > 1 the tail that does
  // not fill a step of world*batch is dropped, whatever drop_last says, so that every rank runs the
  // same number of equal batches.
  Shard shard;
};

struct Batch {
  Tensor x, y;         // on the loader's device; x float [n, sample shape], y int32 [n]
  int64_t index = 0;   // batch number in the epoch
  int64_t size = 0;    // samples
  double wait_ms = 0;  // how long next() waited for it on the host
  // Of wait_ms, the part that did not keep the GPU waiting: all of it when the step issued before
  // was still running as the batch arrived (the host was ahead of the GPU), else the time its slot
  // was still held by the GPU (its last copy waits for the step that read the slot before:
  // back-pressure). The rest of wait_ms starved the GPU. 0 on the CPU.
  double gpu_wait_ms = 0;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& opt);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const;
  // Starts prefetching epoch `epoch` (its order depends only on seed and epoch). Abandons the
  // rest of a previous epoch. Where start_epoch_ahead(epoch) came first, the epoch is already
  // under way and this changes nothing.
  void start_epoch(int epoch);
  // start_epoch(epoch) now, while the caller finishes the epoch before (its last step issued, the
  // device still running it): the workers collate the next epoch's first batches and queue their
  // copies behind the steps that read their slots, so the device does not wait for them when the
  // epoch begins (Trainer::train_epoch calls it when its caller says another epoch follows).
  void start_epoch_ahead(int epoch);
  // The next batch, or false at the end of the epoch. Rethrows a worker's exception with the
  // sample index. Valid until release().
  bool next(Batch& b);
  // After the step that used b has been issued: its slot may be refilled once that step finishes.
  void release(const Batch& b);
  // Stops the workers (idempotent; also on destruction). Never hangs.
  void stop();

  const LoaderOptions& options() const { return opt_; }

 private:
  struct Slot;
  void worker_loop();
  void fill(Slot& s, int64_t batch);
  double gpu_wait(int64_t j, const Slot& s, double t0, double t1) const;
  std::vector<int32_t> rank_order(int epoch) const;

  std::shared_ptr<const Dataset> data_;
  LoaderOptions opt_;
  int64_t sample_elems_ = 0;
  Shape x_shape_;  // [batch, sample shape]
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<int32_t> order_;  // this rank's samples in the epoch, batch after batch
  int epoch_ = 0;
  int ahead_ = -1;  // the epoch start_epoch_ahead started, until start_epoch takes it over
  int64_t n_batches_ = 0;
  std::atomic<int64_t> next_to_fill_{0};
  int64_t next_to_take_ = 0;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  void* copy_stream_ = nullptr;
  int cuda_device_ = -1;  // the CUDA device current where the loader was made, made current in each worker
};

}  // namespace loupe::loader
