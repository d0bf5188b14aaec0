#include "loader/loader.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "core/cuda_runtime.h"
#include "core/denormals.h"
#include "core/error.h"
#include "core/nvtx.h"
#include "core/philox.h"
#include "loader/sampler.h"
#include "ops/view.h"

namespace loupe::loader {

namespace {
enum class State { Free, Filling, Ready };
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

struct DataLoader::Slot {
  // x and y share one buffer on each side ([batch x sample floats | batch int32 labels]), so a
  // batch is one copy.
  Tensor host_buf, dev_buf, host_x, host_y, dev_x, dev_y;
  State state = State::Free;
  int64_t batch = -1;       // the batch this slot holds or will hold next
  int64_t size = 0;
  std::exception_ptr error;
  std::string error_text;
  // CUDA events, created once and re-recorded (a stream wait captures the record it sees).
  void* copy_done = nullptr;  // the slot's host buffer may be overwritten after it
  void* consumed = nullptr;   // the step that read the device buffer has finished
  bool copied = false, used = false;  // whether those events have been recorded yet
  // When its worker began the batch and when the GPU let go of the slot (the copy before done),
  // on now_ms()'s clock: between them the worker waited for the GPU.
  double fill_start_ms = 0, gpu_free_ms = 0;
};

namespace {
// Views of one float buffer as x [batch, sample...] and the int32 labels after it.
void split(const Tensor& buf, const Shape& x_shape, Tensor& x, Tensor& y) {
  int64_t nx = x_shape.numel(), b = x_shape[0];
  x = as_strided(buf, x_shape, contiguous_strides(x_shape), 0);
  y = as_strided(buf, Shape{b}, Shape{1}, nx);
  y.impl()->dtype = DType::i32;  // same element size: the labels are stored as int32 bits
}

// Checked here rather than at the first epoch, so that a bad --batch or --gpus fails at start-up.
void check_shard(const Shard& s, int64_t n, int64_t batch) {
  if (s.world < 1 || s.rank < 0 || s.rank >= s.world)
    throw Error("the loader's rank " + std::to_string(s.rank) + " is outside a world of " + std::to_string(s.world) +
                " processes: the world must be at least 1 and the rank from 0 to world - 1");
  if (s.world > 1 && n < s.world * batch)
    throw Error("the data set has " + std::to_string(n) + " samples, fewer than one global step of " +
                std::to_string(s.world) + " ranks x " + std::to_string(batch) +
                ": use a smaller --batch or fewer --gpus");
}

std::vector<int32_t> identity_order(int64_t n) {
  std::vector<int32_t> order(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  return order;
}
}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& opt) : data_(std::move(data)), opt_(opt) {
  LOUPE_CHECK(opt_.batch > 0 && opt_.workers > 0 && opt_.prefetch > 0, "the loader needs batch, --workers and "
              "--prefetch of at least 1");
  int64_t n = data_->size();
  if (n < opt_.batch)
    throw Error("the data set has " + std::to_string(n) + " samples, fewer than one batch of " +
                std::to_string(opt_.batch) + ": use a smaller --batch");
  if (n == 0) throw Error("the data set is empty");
  check_shard(opt_.shard, n, opt_.batch);
  sample_elems_ = data_->sample_shape().numel();
  x_shape_ = Shape{opt_.batch};
  for (int64_t d : data_->sample_shape()) x_shape_.push_back(d);
  bool cuda = opt_.device.is_cuda();
  if (cuda) {
    cuda_device_ = cuda_runtime()->current_device();
    copy_stream_ = cuda_runtime()->stream_create();
  }
  try {
    for (int k = 0; k < opt_.prefetch; ++k) {
      auto s = std::make_unique<Slot>();
      bool pinned = cuda && opt_.pin_memory;
      Shape whole{x_shape_.numel() + opt_.batch};
      s->host_buf = pinned ? empty_pinned(whole, DType::f32) : empty(whole, DType::f32, kCPU);
      split(s->host_buf, x_shape_, s->host_x, s->host_y);
      if (cuda) {
        s->dev_buf = empty(whole, DType::f32, opt_.device);
        split(s->dev_buf, x_shape_, s->dev_x, s->dev_y);
        s->copy_done = cuda_runtime()->event_create();
        s->consumed = cuda_runtime()->event_create();
      } else {
        s->dev_x = s->host_x;
        s->dev_y = s->host_y;
      }
      slots_.push_back(std::move(s));
    }
  } catch (const Error& e) {
    throw Error(std::string("the loader's ") + std::to_string(opt_.prefetch) + " batch slots of " +
                std::to_string(opt_.batch) + " samples do not fit in memory: " + e.what() +
                "\nHINT: use a smaller --batch or --prefetch");
  }
}

DataLoader::~DataLoader() {
  stop();
  if (!copy_stream_) return;
  for (auto& s : slots_) {  // pinned buffers must not be freed under an in-flight copy
    if (s->copied) cuda_runtime()->event_synchronize(s->copy_done);
    cuda_runtime()->event_destroy(s->copy_done);
    cuda_runtime()->event_destroy(s->consumed);
  }
}

int64_t DataLoader::batches_per_epoch() const {
  int64_t n = data_->size();
  if (opt_.shard.world > 1) return shard_steps(n, opt_.batch, opt_.shard);
  return opt_.drop_last ? n / opt_.batch : (n + opt_.batch - 1) / opt_.batch;
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void DataLoader::start_epoch_ahead(int epoch) {
  start_epoch(epoch);
  ahead_ = epoch;
}

void DataLoader::start_epoch(int epoch) {
  const bool under_way = ahead_ == epoch;
  ahead_ = -1;
  if (under_way) return;
  stop();
  epoch_ = epoch;
  order_ = rank_order(epoch);
  n_batches_ = batches_per_epoch();
  next_to_fill_ = 0;
  next_to_take_ = 0;
  for (size_t k = 0; k < slots_.size(); ++k) {
    slots_[k]->state = State::Free;
    slots_[k]->batch = int64_t(k);
    slots_[k]->error = nullptr;
  }
  stopping_ = false;
  for (int w = 0; w < opt_.workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

// The global order of the epoch, or with world > 1 this rank's part of its full steps, batch after
// batch, so that fill() reads batch j from j*batch either way.
std::vector<int32_t> DataLoader::rank_order(int epoch) const {
  int64_t n = data_->size();
  std::vector<int32_t> order = opt_.shuffle ? epoch_permutation(n, opt_.seed, epoch) : identity_order(n);
  if (opt_.shard.world == 1) return order;
  const int64_t steps = batches_per_epoch();
  std::vector<int32_t> mine;
  mine.reserve(size_t(steps * opt_.batch));
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int32_t> part = shard_batch(order, step, opt_.batch, opt_.shard);
    mine.insert(mine.end(), part.begin(), part.end());
  }
  return mine;
}

void DataLoader::worker_loop() {
  pthread_setname_np(pthread_self(), "loupe-loader");
  apply_denormal_mode();  // augmentation and normalisation are float work too
  if (cuda_device_ >= 0) cuda_runtime()->set_current_device(cuda_device_);
  for (;;) {
    int64_t j = next_to_fill_.fetch_add(1);
    if (j >= n_batches_) return;
    Slot& s = *slots_[size_t(j % int64_t(slots_.size()))];
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return stopping_ || (s.state == State::Free && s.batch == j); });
      if (stopping_) return;
      s.state = State::Filling;
    }
    try {
      fill(s, j);
    } catch (...) {
      s.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> l(m_);
      s.state = State::Ready;
    }
    cv_.notify_all();
  }
}

void DataLoader::fill(Slot& s, int64_t j) {
  NvtxRange r("collate");
  // The slot's previous copy must have left the host buffers before we overwrite them.
  s.fill_start_ms = now_ms();
  if (s.copied) cuda_runtime()->event_synchronize(s.copy_done);
  s.gpu_free_ms = s.copied ? now_ms() : s.fill_start_ms;
  int64_t begin = j * opt_.batch, end = std::min<int64_t>(begin + opt_.batch, int64_t(order_.size()));
  s.size = end - begin;
  float* x = s.host_x.data<float>();
  int32_t* y = s.host_y.data<int32_t>();
  for (int64_t k = 0; k < s.size; ++k) {
    int64_t idx = order_[size_t(begin + k)];
    uint64_t rng = philox(opt_.seed, uint64_t(idx), 0xA116u + uint64_t(epoch_)).v[0];
    try {
      data_->get(idx, x + k * sample_elems_, y + k, rng);
    } catch (const std::exception& e) {
      throw Error("loading sample " + std::to_string(idx) + " failed: " + e.what());
    }
  }
  if (!copy_stream_) return;
  NvtxRange c("h2d copy");
  CudaRuntime* rt = cuda_runtime();
  // The device slot is free once the step that read it has finished: the copy stream waits for
  // that event, the host does not.
  if (s.used) rt->stream_wait_event(copy_stream_, s.consumed);
  // One copy of the whole slot (a partial last batch copies some unused floats: cheaper than two calls).
  rt->copy_async_on(copy_stream_, s.dev_buf.data_ptr(), s.host_buf.data_ptr(), s.host_buf.nbytes(),
                    CopyKind::HostToDevice);
  rt->event_record(s.copy_done, copy_stream_);
  s.copied = true;
}

// Of a wait [t0, t1] for batch j in slot s, the part the GPU did not wait for: all of it while the
// step before (the last one issued) is still running when the batch arrives, since the GPU then
// never ran out of work; else the part in which the slot's worker waited for the GPU to let go of
// the slot (back-pressure). What is left is a wait that starved the GPU.
double DataLoader::gpu_wait(int64_t j, const Slot& s, double t0, double t1) const {
  if (!copy_stream_ || j == 0) return 0;
  const Slot& before = *slots_[size_t((j - 1) % int64_t(slots_.size()))];
  if (before.used && !cuda_runtime()->event_done(before.consumed)) return t1 - t0;
  return std::max(0.0, std::min(t1, s.gpu_free_ms) - std::max(t0, s.fill_start_ms));
}

bool DataLoader::next(Batch& b) {
  if (next_to_take_ >= n_batches_) return false;
  int64_t j = next_to_take_++;
  Slot& s = *slots_[size_t(j % int64_t(slots_.size()))];
  double t0 = now_ms();
  {
    NvtxRange r("data wait");
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return stopping_ || (s.state == State::Ready && s.batch == j); });
    if (stopping_) throw Error("the data loader was stopped");
  }
  const double t1 = now_ms();
  b.wait_ms = t1 - t0;
  b.gpu_wait_ms = gpu_wait(j, s, t0, t1);
  if (s.error) std::rethrow_exception(s.error);
  if (copy_stream_) cuda_runtime()->stream_wait_event(nullptr, s.copy_done);  // compute waits for the copy
  b.index = j;
  b.size = s.size;
  b.x = s.size == opt_.batch ? s.dev_x : slice(s.dev_x, 0, 0, s.size);
  b.y = s.size == opt_.batch ? s.dev_y : slice(s.dev_y, 0, 0, s.size);
  return true;
}

void DataLoader::release(const Batch& b) {
  Slot& s = *slots_[size_t(b.index % int64_t(slots_.size()))];
  if (copy_stream_) {
    cuda_runtime()->event_record(s.consumed, nullptr);  // after the step on the compute stream
    s.used = true;
  }
  {
    std::lock_guard<std::mutex> l(m_);
    s.state = State::Free;
    s.batch = b.index + int64_t(slots_.size());
  }
  cv_.notify_all();
}

}  // namespace loupe::loader
