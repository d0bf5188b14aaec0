// The training loop: one step = gather batch -> forward -> loss -> backward -> fused update, with
// no host synchronisation inside a step (docs/design.md principle 3). Loss sums and correct counts
// accumulate on the device and are read once per epoch. On the GPU the step is recorded once as a
// CUDA graph and replayed for every full batch (docs/performance.md, "The step as one CUDA graph").
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/flops.h"
#include "core/precision.h"
#include "core/clock.h"
#include "core/tensor.h"
#include "loader/sampler.h"
#include "nn/module.h"
#include "ops/view.h"
#include "optim/optimizer.h"
#include "train/loss.h"
#include "train/observer.h"
#include "train/step_graph.h"
#include "train/step_parts.h"

namespace loupe::loader { class DataLoader; }
namespace loupe::parallel {  // data parallelism (framework/parallel/)
class Communicator;
class GradReducer;
}  // namespace loupe::parallel

namespace loupe::train {

using parallel::Communicator;
using parallel::GradReducer;

// Samples and labels held in one tensor each (uint8 images, uint8 or int32 labels) on a device;
// batches are gathered from it by index and converted to float (x * x_scale) on that device.
struct TensorDataset {
  Tensor x, y;
  double x_scale = 1.0 / 255.0;
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  TensorDataset to(Device d) const { return {loupe::to(x, d), loupe::to(y, d), x_scale}; }
};

// Thrown by Trainer::evaluate when a stop (Control::stopping) comes between its batches.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// --graph: auto (a graph on the GPU where the capture succeeds, else eager, saying why), on (a
// graph or an error), off (every step issued from the host).
enum class GraphMode { Auto, On, Off };
GraphMode parse_graph_mode(const std::string& s);  // "auto", "on", "off"; else an Error naming them
const char* graph_mode_name(GraphMode m);
// Why mode m cannot run on device d ("" when it can): --graph on needs a GPU.
std::string graph_unsupported(GraphMode m, Device d);

struct TrainerOptions {
  Loss loss = Loss::CrossEntropy;  // the model's, from its recipe; the logits' shape is checked against it
  // The arithmetic (core/precision.h); unset: the precision of the scope the trainer is made in.
  std::optional<Precision> precision;
  GraphMode graph = GraphMode::Auto;
  // Full-batch steps run eagerly before the capture: the first chooses every cuDNN plan, LSTM
  // algorithm and cuBLAS kernel (none of which may be chosen inside a capture), the second checks
  // that nothing is left to choose.
  int graph_warmup = 2;
  // End the epoch as soon as the loss is seen to be non-finite (EpochStats::diverged). Benchmarks
  // turn it off: they time a fixed number of steps and report a divergence instead.
  bool stop_on_divergence = true;
  // Data parallelism (docs/multi-gpu.md): this process is one rank of comm's world. The weights
  // start as rank 0's, each rank trains on its shard of every global step (the batch is per rank),
  // the gradients are averaged in buckets during backward (parallel/ddp.h), the epoch's loss and
  // accuracy and the evaluation are the whole world's. Null: one process, as ever.
  Communicator* comm = nullptr;
};

class Trainer {
 public:
  // With fp16 the trainer scales the loss through a GradScaler (optim/grad_scaler.h) and the
  // optimizer skips the steps whose gradients overflowed, all on the device.
  Trainer(nn::Module& model, optim::Optimizer& opt, Device device, TrainerOptions o = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  const optim::GradScaler* scaler() const { return scaler_.get(); }
  // Observers (train/observer.h), called in the order added; the trainer does not own them.
  void observe(Observer& o);
  void unobserve(Observer& o);
  // What observers ask of the run; also the way to stop it from outside (Control::watch).
  Control& control() { return control_; }
  // A learning rate an observer asked for (Control::set_lr), applied now and noted in the
  // control's notes ("lr 0.001 -> 0.0005 (why)"); the trainer calls it before each step.
  void apply_lr();
  int64_t global_step() const { return global_step_; }
  // The classes the model tells apart (logits' columns; 2 for a binary classifier), known once a
  // step or an evaluation ran, else 0: what a model at chance scores (train/divergence.h).
  int64_t classes() const { return classes_; }
  void set_global_step(int64_t s) { global_step_ = s; }
  Precision precision() const { return precision_; }
  // How full batches run, for the run header: "CUDA graph from step N (...)" or "eager: why".
  std::string step_mode() const;
  bool graphs_on() const { return graphs_; }

  // The steps of one epoch: ceil(n / batch) over a resident data set, or the loader's batches per
  // epoch; at most max_steps when max_steps >= 0 (train_epoch runs exactly this many).
  // With data parallelism, floor(n / (world * batch)) global steps (loader/sampler.h's shard_steps).
  static int64_t epoch_steps(int64_t n, int64_t batch, int64_t max_steps = -1, loader::Shard shard = {});
  static int64_t epoch_steps(const loader::DataLoader& dl, int64_t max_steps = -1);

  // One pass over `data` in shuffled batches of `batch` (the last one may be smaller). Stops after
  // max_steps steps when max_steps >= 0. With `cycle` (benchmarks: a timed stretch longer than the
  // data set), it runs exactly max_steps steps, starting over in the same order at the end.
  EpochStats train_epoch(const TensorDataset& data, int64_t batch, uint64_t seed, int epoch, int64_t max_steps = -1,
                         bool cycle = false);
  // The same through the asynchronous loader (its batch size, order and device). With
  // `next_follows` (the caller will train epoch + 1 next) the loader starts that epoch while this
  // one's last steps run (DataLoader::start_epoch_ahead); without, nothing is collated in vain.
  EpochStats train_epoch(loader::DataLoader& loader, int epoch, int64_t max_steps = -1, bool next_follows = false);
  // Accuracy on `data` in eval mode, no gradients; full batches replayed from a graph of their own.
  // With data parallelism each rank evaluates its contiguous part and the counts are summed. With
  // max_batches >= 0 each rank evaluates at most that many batches of its part (--max-steps: a
  // quick check's evaluation is bounded too), and the accuracy is over the samples evaluated; NaN
  // for a loss without one (mean squared error: has_accuracy), whose figure is last_eval_loss().
  static constexpr int64_t kEvalBatch = 1000;  // one graph serves every full evaluation batch
  double evaluate(const TensorDataset& data, int64_t batch = kEvalBatch, int64_t max_batches = -1);
  // The order the resident path trains epoch `epoch` of n samples in (loader::epoch_permutation),
  // on the device: the one made during the epoch before where it was made for these n, seed, epoch.
  Tensor epoch_order(int64_t n, uint64_t seed, int epoch);
  // The mean loss (the recipe's: cross-entropy or binary cross-entropy) over the samples the last
  // evaluate() took, read back with its accuracy; -1 before any.
  double last_eval_loss() const { return eval_loss_value_; }
  // The samples evaluate() takes over the world with these bounds (every rank computes it alike).
  int64_t eval_samples(int64_t n, int64_t batch, int64_t max_batches) const;

  // Data parallelism: this rank's place, the gradient buckets (null without a communicator).
  loader::Shard shard() const { return shard_; }
  const GradReducer* reducer() const { return reducer_.get(); }
  // Rank 0's weights (and float buffers) to every rank: at the start and after a resume.
  void broadcast_weights();

 private:
  // A batch as it arrives (raw: the resident path's ids, or the loader's x and y on the device)
  // and how the step turns it into inputs and labels (the resident path's gather, inside the step
  // and so inside its graph).
  using Stage = std::function<void(const std::vector<Tensor>& raw, Tensor& x, Tensor& y)>;
  struct Source {
    std::function<bool(std::vector<Tensor>& raw, int64_t& size)> next;  // false at the end
    Stage stage;
    std::function<void()> done;  // after the step that used the batch has been issued
    int64_t full_batch = 0;      // the batch size a graph serves
    const void* key = nullptr;   // what the stage reads besides raw (a graph is for one data set)
    // After the epoch's last step is issued, while the device still runs it: work for the next
    // epoch (its order), so that the device does not wait for it at the next epoch's start.
    std::function<void()> ahead;
    // Set by next: of the fetch's wait, the time the loader's slot was held by the GPU
    // (loader::Batch::gpu_wait_ms; 0 for other sources).
    double gpu_wait_ms = 0;
  };
  // A graph and what it was captured for: static copies of the raw batch, the warm-up count.
  struct Graphed {
    StepGraph graph;
    std::vector<Tensor> raw;  // the static buffers the graph reads
    const void* key = nullptr;
    int64_t batch = 0;
    int warm = 0;
    double flops = 0;         // counted on the host during the capture
    // For the batch `in` of data set k: new buffers (and a new capture after the warm-up) unless
    // the graph already serves that.
    void prepare(const std::vector<Tensor>& in, const void* k, int64_t b);
  };
  // The epoch: a loop over steps, with the observers (train/observer.h) around each.
  EpochStats run_epoch(int epoch, int64_t total, Source& src);
  // One step of src's next batch: fetched (what that takes is the step's data wait), then issued
  // through the graph when one serves a full batch of this data set, else eagerly. The batch
  // size; 0 when the source is done.
  int64_t step(Source& src, EpochStats& st, StepInfo& info);
  // After the steps: the world's sums, the epoch's one read-back, the scaler's figures.
  EpochStats end_epoch(EpochStats st, double t0);
  // The step itself, eager; every kernel argument is the same from step to step (graph-safe).
  void train_step(const std::vector<Tensor>& raw, int64_t b, const Stage& stage);
  void eval_step(const Tensor& idx, const TensorDataset& data);
  // One step of a full batch through the graph (warming up or capturing as needed); false when it
  // must run eagerly instead. `flops` gets the step's FLOPs.
  bool graphed_step(Graphed& g, const std::vector<Tensor>& raw, const std::function<void()>& step, double& flops,
                    EpochStats* st);
  // A capture failed: --graph on stops with the reason; auto runs that kind of step eagerly.
  void graph_failed(const std::string& why, bool training, EpochStats* st);

  nn::Module& model_;
  optim::Optimizer& opt_;
  Device device_;
  TrainerOptions options_;
  Precision precision_;
  FlopCounter flops_;  // this run's FLOPs (core/flops.h), counted while its scope is open
  int64_t global_step_ = 0;
  int64_t classes_ = 0;
  std::unique_ptr<optim::GradScaler> scaler_;
  bool sixteen_checked_ = false;  // whether the first step has shown that some layer computes in 16 bits
  std::string precision_event_;   // what the first step dropped, for the epoch's stats
  int64_t skipped_before_ = 0;  // the scaler's skipped count at the end of the previous epoch
  bool graphs_ = false;         // full training batches go through a graph
  bool eval_graphs_ = false;    // and full evaluation batches through another
  std::string eager_why_;       // why training steps do not
  Graphed train_graph_, eval_graph_;
  // The epoch's sums on the device (fixed addresses: graphs add into them): loss_sum_ and correct_
  // are sums_[0] and sums_[1]; sums_[2] takes the weights' sum at the epoch's end.
  Tensor sums_, loss_sum_, correct_;
  // A float32 one on the device: the backward pass's seed without a scaler, the same tensor every
  // step, so that the loss can make its gradient in its forward kernels (cross_entropy_counted).
  Tensor one_;
  Tensor peek_buffer_;          // pinned, for the loss peek: allocated once (loss_peek.h says why)
  Tensor readback_;             // pinned, for the epoch's one read-back: allocated once, as peek_buffer_
  // The resident path's order for an epoch, made and uploaded during the one before (Source::ahead).
  struct Order {
    int64_t n = 0;
    uint64_t seed = 0;
    int epoch = -1;
    Tensor perm;  // on the device
  } next_order_;
  Tensor order_staging_;           // pinned: the order's way to the device (make_order_ahead says why)
  void* order_staged_ = nullptr;   // an event after the last copy out of it
  void make_order_ahead(int64_t n, uint64_t seed, int epoch);
  // The epoch's figures on the device (the loss and correct sums, the weights' sum, the scaler's
  // state) read in one wait; empty when a stop came while waiting.
  std::vector<float> read_epoch_sums();
  Tensor eval_sums_, eval_correct_, eval_loss_;  // [correct, loss sum]: one buffer, one read-back
  double eval_loss_value_ = -1;
  loader::Shard shard_;
  std::unique_ptr<GradReducer> reducer_;
  std::vector<std::unique_ptr<StepPart>> parts_;  // the reducer's and the scaler's (train/step_parts.h)
  void build_step_parts();
  bool check_ranks_ = false;   // LOUPE_DDP_CHECK: the ranks' weights compared after every step
  Tensor checksum_, checksums_;
  void check_ranks_agree();
  void broadcast_buffers();
  std::vector<Observer*> observers_;
  Control control_;
  bool stop_requested() const { return control_.stopping(); }
  // Data parallelism: waits until the device has done what was issued (the collectives just
  // entered), or returns false as soon as a stop is requested meanwhile.
  bool device_done_or_stop() const;
};

}  // namespace loupe::train
