#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/knobs.h"
#include "core/nvtx.h"
#include "core/op_record.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "parallel/comm.h"
#include "parallel/ddp.h"
#include "train/loss_peek.h"
#include "train/step_parts.h"

namespace loupe::train {

GraphMode parse_graph_mode(const std::string& s) {
  if (s == "auto") return GraphMode::Auto;
  if (s == "on") return GraphMode::On;
  if (s == "off") return GraphMode::Off;
  throw Error("--graph takes auto, on or off, got '" + s + "'");
}

const char* loss_name(Loss l) {
  switch (l) {
    case Loss::BinaryCrossEntropyWithLogits: return "binary cross-entropy with logits";
    case Loss::MeanSquaredError: return "mean squared error";
    case Loss::CrossEntropy: break;
  }
  return "cross-entropy";
}

const char* graph_mode_name(GraphMode m) { return m == GraphMode::Auto ? "auto" : m == GraphMode::On ? "on" : "off"; }

std::string graph_unsupported(GraphMode m, Device d) {
  if (m != GraphMode::On || d.is_cuda()) return "";
  return "--graph on: CUDA graphs are a GPU feature; on the CPU every step is issued eagerly (--graph auto or off)";
}

Trainer::Trainer(nn::Module& model, optim::Optimizer& opt, Device device, TrainerOptions o)
    : model_(model), opt_(opt), device_(device), options_(o), precision_(o.precision.value_or(loupe::precision())) {
  std::string why = precision_unsupported(precision_, device);
  if (!why.empty()) throw Error(why);
  if (precision_ == Precision::FP16) {
    scaler_ = std::make_unique<optim::GradScaler>(device);
    opt_.set_scaler(scaler_.get());
  }
  // fp16/bf16: the 16-bit copy of the weights that the layers read, refreshed once per update
  // (one kernel) rather than cast per weight per use. LOUPE_COMPUTE_COPY=0 casts on the fly, for
  // comparison.
  const DType cd = compute_dtype(precision_);
  if (cd != DType::f32 && device.is_cuda() && knobs::flag("LOUPE_COMPUTE_COPY"))
    model_.arena().enable_compute_copy(cd, model_.float32_parameters());
  why = graph_unsupported(o.graph, device);
  if (!why.empty()) throw Error(why);
  if (o.graph == GraphMode::Off) eager_why_ = "--graph off";
  else if (!device.is_cuda()) eager_why_ = "CUDA graphs are a GPU feature";
  else graphs_ = eval_graphs_ = true;
  LOUPE_CHECK(o.graph_warmup >= 1, "a CUDA graph needs at least one eager warm-up step before its capture");
  if (o.comm) {
    shard_ = {o.comm->rank(), o.comm->world()};
    reducer_ = std::make_unique<GradReducer>(model_.arena(), *o.comm, parallel::reducer_options_from_knobs());
    check_ranks_ = knobs::flag("LOUPE_DDP_CHECK");
    broadcast_weights();
  }
  build_step_parts();
}

// The step's parts in the order they act: the reducer's join before the scaler's check reads the
// averaged gradients.
void Trainer::build_step_parts() {
  parts_.clear();
  if (reducer_) parts_.push_back(reducer_part(*reducer_, scaler_.get()));
  if (scaler_) parts_.push_back(scaler_part(*scaler_, model_.arena()));
}

Trainer::~Trainer() {
  if (scaler_) opt_.set_scaler(nullptr);
  if (order_staged_) cuda_runtime()->event_destroy(order_staged_);
}

void Trainer::broadcast_weights() {
  if (!options_.comm) return;
  options_.comm->broadcast(model_.arena().values(), 0);
  broadcast_buffers();
  model_.arena().refresh_compute_copy();
}

// Running statistics (batch norm) are updated by each rank on its own shard: rank 0's count, as
// with PyTorch DDP's broadcast_buffers, at the start and before each evaluation.
void Trainer::broadcast_buffers() {
  for (auto& [name, b] : model_.named_buffers())
    if (b.is_contiguous() && b.dtype() == DType::f32) options_.comm->broadcast(b, 0);
}

// LOUPE_DDP_CHECK: every rank's checksum of its weights, gathered and compared on the host (a
// wait per step: a debugging aid, not for timing). Identical weights give identical sums.
void Trainer::check_ranks_agree() {
  NoGradGuard g;
  if (!checksums_.defined()) checksums_ = empty(Shape{shard_.world}, DType::f32, device_);
  checksum_ = sum(model_.arena().values());
  options_.comm->all_gather(reshape(checksum_, Shape{1}), checksums_);
  if (!device_done_or_stop()) return;  // Ctrl-C: the peer may have stopped a step earlier
  std::vector<float> v = checksums_.to_vector<float>();
  for (size_t r = 1; r < v.size(); ++r)
    if (std::memcmp(&v[r], &v[0], sizeof(float)) != 0)
      throw Error("LOUPE_DDP_CHECK: after step " + std::to_string(global_step_) + " rank " + std::to_string(r) +
                  "'s weights differ from rank 0's (checksums " + std::to_string(v[r]) + " and " +
                  std::to_string(v[0]) + "): the ranks no longer train one model");
}

std::string Trainer::step_mode() const {
  if (!graphs_) return "eager: " + eager_why_;
  return "CUDA graph from full batch " + std::to_string(options_.graph_warmup + 1) + " (--graph " +
         graph_mode_name(options_.graph) + "; the " + std::to_string(options_.graph_warmup) +
         " before it and each epoch's last, partial batch eagerly)";
}

namespace {
// The samples at ids idx of a resident data set: x as float (scaled) in the dtype and memory
// format the model's first layer reads, labels as int32, float targets (a regression's) as float32.
void gather_resident(const TensorDataset& data, const Tensor& idx, Tensor& x, Tensor& y, const nn::Module& model) {
  const bool floats = is_floating(data.x.dtype()) || data.x.dtype() == DType::u8;
  const nn::Module::InputLayout in = floats ? model.input_layout() : nn::Module::InputLayout{};
  x = index_select(data.x, idx, in.dtype, data.x_scale, in.format);
  y = index_select(data.y, idx, is_floating(data.y.dtype()) ? DType::f32 : DType::i32);
}
}  // namespace

int64_t Trainer::epoch_steps(int64_t n, int64_t batch, int64_t max_steps, loader::Shard shard) {
  const int64_t total = shard.world > 1 ? loader::shard_steps(n, batch, shard) : (n + batch - 1) / batch;
  return max_steps >= 0 ? std::min(total, max_steps) : total;
}

int64_t Trainer::epoch_steps(const loader::DataLoader& dl, int64_t max_steps) {
  const int64_t total = dl.batches_per_epoch();
  return max_steps >= 0 ? std::min(total, max_steps) : total;
}

EpochStats Trainer::train_epoch(const TensorDataset& data, int64_t batch, uint64_t seed, int epoch, int64_t max_steps,
                                bool cycle) {
  int64_t n = data.size();
  LOUPE_CHECK(n > 0 && batch > 0, "training needs a non-empty data set and a positive batch size");
  // The order is uploaded once per epoch, not per step, and made during the epoch before.
  const Tensor perm = epoch_order(n, seed, epoch);
  LOUPE_CHECK(!cycle || max_steps >= 0, "cycling through the data needs a step count");
  int64_t total = cycle ? max_steps : epoch_steps(n, batch, max_steps, shard_), step = 0;
  // Data parallelism: this rank's part of each global step, where loader/sampler.h's shard_offset
  // puts it (the loader's path takes the same); the tail short of a whole global step is dropped.
  // One process keeps the last, partial batch.
  const int64_t steps = shard_.world > 1 ? loader::shard_steps(n, batch, shard_) : (n + batch - 1) / batch,
                n_used = shard_.world > 1 ? steps * batch * shard_.world : n;
  LOUPE_CHECK(steps > 0, "the data set has ", n, " samples, fewer than one global step of ", shard_.world, " ranks x ",
              batch, ": a smaller --batch or fewer GPUs");
  Source src;
  src.next = [&](std::vector<Tensor>& raw, int64_t& b) {
    if (step >= steps && cycle) step = 0;
    if (step >= steps) return false;
    const int64_t first = loader::shard_offset(step++, batch, shard_), end = std::min(n_used, first + batch);
    raw = {slice(perm, 0, first, end)};
    b = end - first;
    return true;
  };
  src.stage = [&data, this](const std::vector<Tensor>& raw, Tensor& x, Tensor& y) {
    gather_resident(data, raw[0], x, y, model_);
  };
  src.done = [] {};
  src.full_batch = batch;
  src.key = data.x.data_ptr();
  src.ahead = [&] { make_order_ahead(n, seed, epoch + 1); };
  return run_epoch(epoch, total, src);
}

// Through pinned memory: a copy from pageable memory may wait for the stream's work before it (the
// epoch's last steps, whose collectives may wait for a peer that stopped at Ctrl-C).
void Trainer::make_order_ahead(int64_t n, uint64_t seed, int epoch) {
  const std::vector<int32_t> order = loader::epoch_permutation(n, seed, epoch);
  if (!device_.is_cuda()) {
    next_order_ = Order{n, seed, epoch, from_vector(order, Shape{n}, device_)};
    return;
  }
  next_order_ = Order{n, seed, epoch, empty(Shape{n}, DType::i32, device_)};
  CudaRuntime* rt = cuda_runtime();
  if (!order_staged_) order_staged_ = rt->event_create();
  else rt->event_synchronize(order_staged_);  // the last copy out of the staging buffer has landed
  if (!order_staging_.defined() || order_staging_.numel() < n) order_staging_ = empty_pinned(Shape{n}, DType::i32);
  std::memcpy(order_staging_.data_ptr(), order.data(), order.size() * sizeof(int32_t));
  rt->copy_async_on(nullptr, next_order_.perm.data_ptr(), order_staging_.data_ptr(), order.size() * sizeof(int32_t),
                    CopyKind::HostToDevice);
  rt->event_record(order_staged_, nullptr);
}

// An epoch's start otherwise waits for the host to shuffle (about 0.2 ms for IMDb's 25,000 samples)
// with the device idle: 2 % of a 12-step epoch of imdb_bilstm on two GPUs.
Tensor Trainer::epoch_order(int64_t n, uint64_t seed, int epoch) {
  const Order& o = next_order_;
  if (o.perm.defined() && o.n == n && o.seed == seed && o.epoch == epoch) return o.perm;
  return from_vector(loader::epoch_permutation(n, seed, epoch), Shape{n}, device_);
}

EpochStats Trainer::train_epoch(loader::DataLoader& dl, int epoch, int64_t max_steps, bool next_follows) {
  LOUPE_CHECK(dl.options().device == device_, "the loader delivers to ", dl.options().device.str(),
              " but the model is on ", device_.str());
  LOUPE_CHECK(dl.options().shard.rank == shard_.rank && dl.options().shard.world == shard_.world,
              "the loader serves rank ", dl.options().shard.rank, " of ", dl.options().shard.world,
              " but the trainer is rank ", shard_.rank, " of ", shard_.world);
  dl.start_epoch(epoch);
  int64_t total = epoch_steps(dl, max_steps);
  loader::Batch batch;
  Source src;
  src.next = [&](std::vector<Tensor>& raw, int64_t& b) {
    if (!dl.next(batch)) return false;
    raw = {batch.x, batch.y};
    b = batch.size;
    src.gpu_wait_ms = batch.gpu_wait_ms;
    return true;
  };
  src.stage = [](const std::vector<Tensor>& raw, Tensor& x, Tensor& y) {
    x = raw[0];
    y = raw[1];
  };
  src.done = [&] { dl.release(batch); };
  // The next epoch's first batches collated and copied while the device runs this one's last
  // steps: its first step would otherwise wait for a batch with the device idle (mnist_cnn at 1024
  // a GPU: about a step's time, once an epoch, twice the share on two GPUs as on one).
  if (next_follows) src.ahead = [&dl, epoch] { dl.start_epoch_ahead(epoch + 1); };
  src.full_batch = dl.options().batch;
  src.key = &dl;
  return run_epoch(epoch, total, src);
}

namespace {
// The logits' shape against the loss the trainer was given: a host check of the shape only (no
// device read), so it costs nothing and holds inside a graph capture.
void check_logits(const Tensor& logits, Loss loss) {
  if (loss == Loss::MeanSquaredError) {
    if (logits.dim() == 2) return;
    throw Error("the loss is mean squared error, which needs outputs of shape [batch, k], but the model gives " +
                logits.shape().str() + " (the loss comes from the model's recipe, models::Recipe::loss, through "
                "TrainerOptions::loss)");
  }
  const bool one_column = logits.dim() == 2 && logits.size(1) == 1;
  const bool binary = loss == Loss::BinaryCrossEntropyWithLogits;
  if (binary ? one_column : logits.dim() == 2 && !one_column) return;
  throw Error(std::string("the loss is ") + loss_name(loss) + ", which needs logits of shape " +
              (binary ? "[batch, 1]" : "[batch, classes >= 2]") + ", but the model gives " + logits.shape().str() +
              (binary ? "; a model with several classes is trained with cross-entropy"
                      : "; a binary classifier with one output column is trained with binary cross-entropy with "
                        "logits") +
              " (the loss comes from the model's recipe, models::Recipe::loss, through TrainerOptions::loss)");
}

Tensor targets_for(Loss loss, const Tensor& logits, const Tensor& labels) {
  if (loss == Loss::MeanSquaredError) {
    if (labels.numel() != logits.numel())
      throw Error("mean squared error: the model gives " + logits.shape().str() + " outputs for a batch whose targets "
                  "are " + labels.shape().str() + " (want " + std::to_string(logits.size(1)) + " per sample)");
    return reshape(to(labels, logits.dtype()), logits.shape());
  }
  return loss == Loss::BinaryCrossEntropyWithLogits ? to(labels, logits.dtype()) : labels;
}

Tensor loss_for(Loss loss, const Tensor& logits, const Tensor& targets) {
  switch (loss) {
    case Loss::BinaryCrossEntropyWithLogits: return binary_cross_entropy_with_logits(flatten(logits, 0), targets);
    case Loss::MeanSquaredError: return mean_squared_error(logits, targets);
    case Loss::CrossEntropy: break;
  }
  return cross_entropy(logits, targets);
}

// The classes a loss's outputs stand for: two for a binary classifier's one column, none for a
// regression.
int64_t classes_of(Loss loss, const Tensor& logits) {
  if (loss == Loss::MeanSquaredError) return 0;
  return loss == Loss::BinaryCrossEntropyWithLogits ? 2 : logits.size(1);
}

// The loss in float32: cross-entropy on a GPU reads 16-bit logits as their float32 cast (a cast
// kernel each way fewer in a mixed-precision step, the same bits); the other losses take the cast.
Tensor loss_input(Loss loss, const Tensor& logits) {
  if (logits.dtype() == DType::f32 || (loss == Loss::CrossEntropy && logits.device().is_cuda())) return logits;
  return to(logits, DType::f32);
}

// acc += the batch's correct predictions (in the count's own kernels: no add after it).
void add_correct(const Tensor& acc, Loss loss, const Tensor& logits, const Tensor& targets) {
  count_correct_into(acc, loss == Loss::BinaryCrossEntropyWithLogits ? flatten(logits, 0) : logits, targets);
}

// Accumulators that share one float32 buffer of n (one fill, one all-reduce, one read-back): made
// on first use with `slots` as scalar views of its first elements, then zeroed. Their addresses
// stay, since captured graphs add into them.
void reset_sums(Tensor& buf, int64_t n, std::initializer_list<Tensor*> slots, Device d) {
  if (!buf.defined()) {
    buf = zeros(Shape{n}, DType::f32, d);
    int64_t k = 0;
    for (Tensor* s : slots) *s = as_strided(buf, Shape{}, Shape{}, k++);
    return;
  }
  fill_(buf, 0.0);
}

}  // namespace

void Trainer::train_step(const std::vector<Tensor>& raw, int64_t b, const Stage& stage) {
  Tensor x, y, logits, loss, seed, penalty;
  bool counted = false;
  const int64_t casts = nn::autocasts_16bit();
  stage(raw, x, y);
  auto zero_grad = [this] {
    OpScope s("zero_grad");
    if (op_records_on()) s.set_bytes(4.0 * double(model_.arena().num_parameters()));  // the float32 gradients, written
    opt_.zero_grad();
  };
  // The gradients read zero when the backward pass starts: zeroed now under data parallelism (whose
  // hooks read each gradient as it completes), else written by that pass where it covers them all.
  std::optional<autograd::FreshGrads> fresh;
  {
    NvtxRange r("forward", RangeKind::Phase);
    if (reducer_) zero_grad();
    else fresh.emplace(zero_grad, model_.arena().params());
    logits = model_(x);
    logits = loss_input(options_.loss, logits);
    check_logits(logits, options_.loss);
    classes_ = classes_of(options_.loss, logits);
    y = targets_for(options_.loss, logits, y);
    // Cross-entropy adds into the running loss and count in its own kernels (the loss head in two
    // launches, not five); the other losses take the adds below.
    // With the backward pass's seed (the scaler's scale, or a one) it makes the logits' gradient too.
    counted = options_.loss == Loss::CrossEntropy;
    if (counted && !one_.defined()) one_ = full(Shape{}, 1.0, DType::f32, device_);  // the first step is eager
    seed = !counted ? Tensor() : scaler_ ? scaler_->seed() : one_;
    loss = counted ? cross_entropy_counted(logits, y, loss_sum_, correct_, double(b), seed)
                   : loss_for(options_.loss, logits, y);
    penalty = model_.penalty();  // Keras's l2 regularizers (nn::Module::regularize): part of the loss
    if (penalty.defined()) loss = add(loss, penalty);
  }
  {
    NvtxRange r("backward", RangeKind::Phase);
    for (const auto& p : parts_) p->before_backward();
    bool done = false;
    for (auto p = parts_.begin(); p != parts_.end() && !done; ++p) done = (*p)->backward(loss);
    if (!done) backward(loss, scaler_ ? Tensor() : seed);
    fresh.reset();
    for (const auto& p : parts_) p->after_backward();
  }
  {
    NvtxRange r("optimizer", RangeKind::Phase);
    for (const auto& p : parts_) p->before_update();
    {
      OpScope s(opt_.name().c_str());
      // Read: values, gradients and each state; written: values and each state (float32).
      if (op_records_on())
        s.set_bytes(4.0 * double(model_.arena().num_parameters()) * double(3 + 2 * opt_.state().size()));
      opt_.step();
    }
    for (const auto& p : parts_) p->after_update();
  }
  NoGradGuard g;
  if (!counted) {
    add_(loss_sum_, loss, double(b));  // on the device: no read-back inside the step
    if (has_accuracy(options_.loss)) add_correct(correct_, options_.loss, logits.detach(), y);
  } else if (penalty.defined()) {
    add_(loss_sum_, penalty.detach(), double(b));  // cross-entropy's kernel added the rest
  }
  // fp16/bf16 on a model where no layer computed in 16 bits (every one too narrow for tensor
  // cores, nn::Linear): the first step shows it, and the loss scaling and the 16-bit weight copy
  // go, since they would only cost (the step is then float32's). The first step is eager, so no
  // graph holds them yet; a model's layers are the same every step.
  if (!sixteen_checked_ && compute_dtype(precision_) != DType::f32) {
    sixteen_checked_ = true;
    if (nn::autocasts_16bit() == casts) {
      precision_event_ = std::string(precision_name(precision_)) + ": no layer computes in 16 bits (each is too " +
                         "narrow for tensor cores), so the step runs in float32" +
                         (scaler_ ? ", without loss scaling" : "");
      model_.arena().disable_compute_copy();
      if (scaler_) {
        opt_.set_scaler(nullptr);
        scaler_.reset();
        build_step_parts();
      }
    }
  }
}

void Trainer::Graphed::prepare(const std::vector<Tensor>& in, const void* k, int64_t b) {
  bool same = k == key && b == batch && in.size() == raw.size();
  for (size_t i = 0; same && i < in.size(); ++i)
    same = in[i].shape() == raw[i].shape() && in[i].dtype() == raw[i].dtype();
  if (same) return;
  graph.reset();
  raw.clear();
  for (const Tensor& t : in) raw.push_back(empty(t.shape(), t.dtype(), t.device()));
  key = k;
  batch = b;
  warm = 0;
}

void Trainer::graph_failed(const std::string& why, bool training, EpochStats* st) {
  const char* what = training ? "training step" : "evaluation step";
  if (options_.graph == GraphMode::On)
    throw Error(std::string("--graph on: the ") + what + " cannot be captured as a CUDA graph: " + why);
  if (!training) {  // evaluation alone runs eagerly from here (no report line carries why)
    eval_graphs_ = false;
    return;
  }
  graphs_ = false;
  eager_why_ = "the CUDA graph capture failed (" + why + ")";
  if (st)
    st->graph_event = "the CUDA graph capture failed at step " + std::to_string(global_step_) + ": " + why +
                      "; every step runs eagerly from here";
}

bool Trainer::graphed_step(Graphed& g, const std::vector<Tensor>& raw, const std::function<void()>& step, double& flops,
                           EpochStats* st) {
  const bool training = &g == &train_graph_;
  for (size_t i = 0; i < raw.size(); ++i) copy_(g.raw[i], raw[i]);  // into the buffers the graph reads
  if (!g.graph.ready()) {
    double f0 = flops_counted();
    if (g.warm < options_.graph_warmup) {  // eager, on the same buffers as the capture
      ++g.warm;
      step();
      flops = flops_counted() - f0;
      return true;
    }
    const int64_t steps0 = opt_.steps();
    std::string why;
    bool ok = g.graph.capture(device_, step, &why);
    // The capture ran the host code once and nothing on the device: undo what it counted, and
    // let the replay below count the step as every replay does.
    g.flops = flops_counted() - f0;
    add_flops(-g.flops);
    opt_.set_host_steps(steps0);
    if (!ok) {
      graph_failed(why, training, st);
      return false;
    }
    if (st && training)
      st->graph_event = "CUDA graph captured at step " + std::to_string(global_step_) + " (" +
                        std::to_string(g.graph.kernels()) + " kernels)";
  }
  {
    NvtxRange r("graph replay");
    g.graph.replay();
  }
  add_flops(g.flops);
  if (training) opt_.set_host_steps(opt_.steps() + 1);  // the graph's own kernels count on the device
  flops = g.flops;
  if (st) ++st->graph_steps;
  return true;
}

void Trainer::observe(Observer& o) {
  if (std::find(observers_.begin(), observers_.end(), &o) == observers_.end()) observers_.push_back(&o);
}

void Trainer::unobserve(Observer& o) { observers_.erase(std::remove(observers_.begin(), observers_.end(), &o), observers_.end()); }

void Trainer::apply_lr() {
  const std::optional<Control::LrChange> c = control_.take_lr();
  if (!c || c->lr == opt_.lr()) return;
  char text[96];
  std::snprintf(text, sizeof text, "lr %g -> %g", opt_.lr(), c->lr);
  opt_.set_lr(c->lr);
  control_.note(std::string(text) + (c->why.empty() ? "" : " (" + c->why + ")"));
}

EpochStats Trainer::run_epoch(int epoch, int64_t total, Source& src) {
  PrecisionScope precision_scope(precision_);
  FlopScope flop_scope(flops_);
  EpochStats st;
  st.epoch = epoch;
  model_.train();
  model_.arena().refresh_compute_copy();  // the values may have changed since (a checkpoint)
  NvtxRange epoch_range("epoch");
  StepInfo info;
  info.epoch = epoch;
  info.step = global_step_;
  info.epoch_steps = total;
  for (Observer* o : observers_) o->epoch_begin(info, control_);
  const double t0 = now_s();
  reset_sums(sums_, 3, {&loss_sum_, &correct_}, device_);
  if (device_.is_cuda() && !peek_buffer_.defined()) peek_buffer_ = empty_pinned(Shape{}, DType::f32);
  LossPeek peek(device_, loss_sum_, peek_buffer_);
  while (st.steps < total) {
    if (control_.stopping()) {
      st.interrupted = true;
      break;
    }
    set_current_step(++global_step_);
    info.step = global_step_;
    info.epoch_step = st.steps + 1;
    info.flops = 0;
    for (Observer* o : observers_) o->step_begin(info, control_);
    apply_lr();
    const int64_t b = step(src, st, info);
    if (b == 0) {  // the source ran out
      --global_step_;
      break;
    }
    st.steps++;
    st.samples += b;
    info.samples = st.samples;
    peek.after_step(st.samples, global_step_);
    info.loss = peek.loss();
    // A non-finite running loss: the run diverged, and the epoch ends here with stop_on_divergence
    // (one process only: ranks see their losses at different steps, and the world's sums are
    // judged at the epoch's end).
    if (info.loss && !std::isfinite(*info.loss) && !st.diverged && shard_.world == 1) {
      st.diverged = true;
      st.diverged_step = peek.step();
      if (options_.stop_on_divergence) break;
    }
    if (check_ranks_) check_ranks_agree();
    for (Observer* o : observers_) o->step_end(info, control_);
  }
  if (src.ahead && !st.interrupted) src.ahead();
  peek.end();
  for (Observer* o : observers_) o->steps_end(info);
  set_current_step(-1);
  return end_epoch(st, t0);
}

int64_t Trainer::step(Source& src, EpochStats& st, StepInfo& info) {
  NvtxRange step_range("step");
  std::vector<Tensor> raw;
  int64_t b = 0;
  {
    NvtxRange r("data");
    for (Observer* o : observers_) o->fetch_begin(info);
    if (!src.next(raw, b)) return 0;
  }
  info.data_gpu_wait_ms = src.gpu_wait_ms;
  for (Observer* o : observers_) o->batch_ready(info);
  double flops = 0;
  bool graphed = false;
  if (graphs_ && b == src.full_batch) {
    train_graph_.prepare(raw, src.key, b);
    graphed = graphed_step(train_graph_, raw, [&] { train_step(train_graph_.raw, b, src.stage); }, flops, &st);
  }
  if (!graphed) {
    const double f0 = flops_counted();
    train_step(raw, b, src.stage);
    flops = flops_counted() - f0;
  }
  info.flops = flops;
  for (Observer* o : observers_) o->step_issued(info);
  src.done();
  return b;
}

// After Ctrl-C the ranks stop where each sees it, maybe a step apart: a rank that ran the epoch's
// last step may wait in the world's sums for a peer that stopped before it and will never come.
// So the host polls instead of blocking, and gives up as soon as it is asked to stop (the caller
// then aborts the communicator, which ends the collective left on the device).
bool Trainer::device_done_or_stop() const {
  if (!options_.comm || !device_.is_cuda()) return true;
  CudaRuntime* rt = cuda_runtime();
  void* e = rt->event_record_on(nullptr);
  bool done = false;
  // Spinning (yielding the core) as cudaStreamSynchronize does for one process: the epoch's end
  // waits here once per epoch for what the host issued ahead, and a 50 us sleep's late wake-up would
  // weigh on imdb_bilstm's short epochs on two GPUs (lab/benchmarks.md, "imdb_bilstm on two GPUs: no
  // host work between epochs"). Sleeping only after 200 ms: a peer that never comes does not hold a
  // core for long.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (!(done = rt->event_done(e)) && !stop_requested()) {
    if (std::chrono::steady_clock::now() < spin_until) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  rt->event_destroy(e);  // a pending event is released once it completes
  return done;
}

// The one wait of the epoch's end: the loss and correct sums, the weights' sum (weights that
// turned non-finite: a last step whose update overflowed, so a checkpoint never keeps them) and the
// loss scaler's state, gathered on the device and copied into pinned memory behind the world's sums.
// Each wait costs a GPU round trip when the GPU has nothing else to do.
std::vector<float> Trainer::read_epoch_sums() {
  copy_(slice(sums_, 0, 2, 3), reshape(sum(model_.arena().values()), Shape{1}));
  Tensor out = sums_;
  if (scaler_) {
    out = empty(Shape{3 + scaler_->state().numel()}, DType::f32, device_);
    copy_(slice(out, 0, 0, 3), sums_);
    copy_(slice(out, 0, 3, out.numel()), scaler_->state());
  }
  if (!device_.is_cuda()) return out.to_vector<float>();
  if (!readback_.defined() || readback_.numel() < out.numel()) readback_ = empty_pinned(Shape{out.numel()}, DType::f32);
  cuda_runtime()->copy_async_on(nullptr, readback_.data_ptr(), out.data_ptr(), out.nbytes(), CopyKind::DeviceToHost);
  if (!device_done_or_stop()) return {};  // the world's sums wait for a peer that stopped
  cuda_runtime()->synchronize();          // at once when the poll above has seen the device done
  const float* p = readback_.data<float>();
  return std::vector<float>(p, p + out.numel());
}

EpochStats Trainer::end_epoch(EpochStats st, double t0) {
  // A rank stopped by Ctrl-C or a signal may be steps apart from the others: no collective and no
  // wait for the device here (the caller aborts the communicator; a peer may never come), even
  // when this rank's loop ran to the epoch's end before it saw the stop.
  bool stopped = options_.comm && (st.interrupted || stop_requested());
  if (options_.comm && !stopped)  // the world's loss and accuracy: every rank ran as many steps
    options_.comm->all_reduce(slice(sums_, 0, 0, 2), parallel::ReduceOp::Sum);  // the loss and the correct count
  const std::vector<float> v = stopped ? std::vector<float>() : read_epoch_sums();
  if (v.empty()) {
    st.interrupted = true;
    st.train_seconds = now_s() - t0;
    return st;
  }
  const double world_samples = double(st.samples) * shard_.world;
  st.train_loss = st.samples ? v[0] / world_samples : 0.0;
  st.train_acc = !has_accuracy(options_.loss) ? std::nan("") : st.samples ? v[1] / world_samples : 0.0;
  if (!st.diverged && (!std::isfinite(st.train_loss) || !std::isfinite(v[2]))) {
    st.diverged = true;
    st.diverged_step = global_step_;
  }
  if (scaler_) {
    st.loss_scale = v[3 + optim::kScale];
    st.skipped_steps = int64_t(v[3 + optim::kSkipped]) - skipped_before_;
    skipped_before_ = int64_t(v[3 + optim::kSkipped]);
  }
  if (train_graph_.graph.ready()) {
    st.graph_kernels = train_graph_.graph.kernels();
  }
  st.precision_event = std::move(precision_event_);
  precision_event_.clear();
  if (!graphs_) st.graph_why = eager_why_;
  st.train_seconds = now_s() - t0;
  for (Observer* o : observers_) o->train_end(st);
  return st;
}

void Trainer::eval_step(const Tensor& idx, const TensorDataset& data) {
  Tensor x, y;
  gather_resident(data, idx, x, y, model_);
  Tensor logits = loss_input(options_.loss, model_(x));
  check_logits(logits, options_.loss);
  classes_ = classes_of(options_.loss, logits);
  const Tensor t = targets_for(options_.loss, logits, y);
  if (has_accuracy(options_.loss)) add_correct(eval_correct_, options_.loss, logits, t);
  add_(eval_loss_, loss_for(options_.loss, logits, t), double(logits.size(0)));  // a mean: times the batch
}

int64_t Trainer::eval_samples(int64_t n, int64_t batch, int64_t max_batches) const {
  int64_t total = 0;
  for (int r = 0; r < shard_.world; ++r) {
    const auto [lo, hi] = loader::shard_part(n, loader::Shard{r, shard_.world});
    total += max_batches >= 0 ? std::min(hi - lo, max_batches * batch) : hi - lo;
  }
  return total;
}

double Trainer::evaluate(const TensorDataset& data, int64_t batch, int64_t max_batches) {
  PrecisionScope precision_scope(precision_);
  FlopScope flop_scope(flops_);
  NvtxRange range("evaluation");
  NoGradGuard g;
  model_.eval();
  if (options_.comm) broadcast_buffers();
  const int64_t n_all = data.size();
  // Data parallelism: this rank's contiguous part (sizes within one of each other), ids into the
  // whole set; the counts are summed over the ranks at the end.
  const auto [lo, hi] = loader::shard_part(n_all, shard_);
  const int64_t n = max_batches >= 0 ? std::min(hi - lo, max_batches * batch) : hi - lo;
  reset_sums(eval_sums_, 2, {&eval_correct_, &eval_loss_}, device_);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(lo + i);
  Tensor all = n ? from_vector(order, Shape{n}, device_) : Tensor();
  for (int64_t start = 0; start < n; start += batch) {
    if (control_.stopping()) {
      model_.train();
      throw Interrupted();
    }
    std::vector<Tensor> raw{slice(all, 0, start, std::min(n, start + batch))};
    const int64_t b = raw[0].size(0);
    bool graphed = false;
    if (eval_graphs_ && b == batch) {
      eval_graph_.prepare(raw, data.x.data_ptr(), b);
      double flops = 0;
      graphed = graphed_step(eval_graph_, raw, [&] { eval_step(eval_graph_.raw[0], data); }, flops, nullptr);
    }
    if (!graphed) eval_step(raw[0], data);
    for (Observer* o : observers_) o->eval_batch(start / batch + 1, (n + batch - 1) / batch);
  }
  model_.train();
  if (options_.comm) {  // as end_epoch: a peer stopped by Ctrl-C may never enter the sum
    if (stop_requested()) throw Interrupted();
    options_.comm->all_reduce(eval_sums_, parallel::ReduceOp::Sum);
    if (!device_done_or_stop()) throw Interrupted();
  }
  const int64_t evaluated = eval_samples(n_all, batch, max_batches);
  const std::vector<float> v = eval_sums_.to_vector<float>();
  eval_loss_value_ = evaluated ? v[1] / double(evaluated) : -1;
  // Keras's l2 regularizers (nn::Module::regularize) are part of the loss it reports: the same
  // penalty for every sample evaluated, so once here rather than in each batch.
  const Tensor penalty = evaluated ? model_.penalty() : Tensor();
  if (penalty.defined()) eval_loss_value_ += penalty.item();
  if (!has_accuracy(options_.loss)) return std::nan("");
  return evaluated ? v[0] / double(evaluated) : 0.0;
}

}  // namespace loupe::train
