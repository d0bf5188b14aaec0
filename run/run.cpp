#include "run/run.h"

#include <cmath>
#include <cstdio>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/nvtx.h"
#include "parallel/launch.h"
#include "instrument/advice.h"
#include "instrument/report_io.h"
#include "loader/loader.h"
#include "models/keras_weights.h"
#include "models/session.h"
#include "nn/recurrent.h"
#include "ops/view.h"
#include "run/interrupt.h"
#include "run/report.h"
#include "run/threads.h"
#include "run/world.h"
#include "train/divergence.h"
#include "train/observers.h"
#include "train/trace_window.h"

namespace loupe::run {

namespace {

constexpr int64_t kEvalBatch = train::Trainer::kEvalBatch;

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A data-parallel rank 0's timeline samples every GPU of its host, labelled by rank. Local rank k
// runs on CUDA device k (parallel::join_world's rule), and loupe's launcher and torchrun number a
// host's ranks in a row, so on rank 0's host it is rank k; other hosts' GPUs are not in the file.
void timeline_peers(const RunConfig& c, instrument::MonitorOptions& m) {
  if (!c.world || c.world->rank() != 0 || m.timeline.empty() || !c.device.is_cuda()) return;
  const parallel::RankEnv env = parallel::rank_env();
  m.timeline_rank = env.rank;
  for (int k = 0; k < env.local_world; ++k)
    if (k != env.local_rank) m.timeline_peers.push_back({k, env.rank - env.local_rank + k});
}

instrument::AdviceInputs advice_inputs(const RunConfig& c) {
  instrument::AdviceInputs adv;
  adv.cuda = c.device.is_cuda();
  adv.tensor_cores = c.device.is_cuda() && cuda_runtime()->compute_capability() >= 70;  // Volta and later
  adv.precision = *c.trainer.precision;
  adv.batch = c.batch;
  return adv;
}

// Several epochs' reports as one stretch: their steps, samples and time summed, the rates over the
// sum, the host's shares and MFU weighed by each epoch's training time (the GPU's: fill_gpu's).
instrument::EpochReport stretch_report(const std::vector<instrument::EpochReport>& parts) {
  instrument::EpochReport out = parts.back();
  out.steps = out.samples = 0;
  out.train_seconds = 0;
  for (const instrument::EpochReport& p : parts) {
    out.steps += p.steps;
    out.samples += p.samples;
    out.train_seconds += p.train_seconds;
  }
  out.samples_per_sec = out.train_seconds > 0 ? double(out.samples) / out.train_seconds : 0;
  using R = instrument::EpochReport;
  for (instrument::Opt R::*f : {&R::mfu, &R::achieved_tflops, &R::host_cpu_util, &R::host_cpu_wait_share,
                                &R::data_wait_share, &R::data_gpu_wait_share}) {
    double sum = 0, secs = 0;
    for (const R& p : parts)
      if (p.*f) {
        sum += *(p.*f) * p.train_seconds;
        secs += p.train_seconds;
      }
    out.*f = secs > 0 ? instrument::Opt(sum / secs) : std::nullopt;
  }
  return out;
}

// The model's LSTMs with hard_sigmoid gates ("lstm1 (0.2)"), which cuDNN cannot run: the header
// says so, and after the first epoch on a GPU which of loupe's kernels ran them (docs/keras.md).
std::string hard_sigmoid_lstms(const nn::Module& m) {
  std::string out;
  for (const auto& [name, child] : m.children()) {
    if (const auto* l = dynamic_cast<const nn::LSTM*>(child.get()); l && l->params().hard_slope > 0)
      out += (out.empty() ? "" : ", ") + name + " (" + fmt_g(l->params().hard_slope) + ")";
    const std::string below = hard_sigmoid_lstms(*child);
    if (!below.empty()) out += (out.empty() ? "" : ", ") + below;
  }
  return out;
}

// What ran the LSTMs on the GPU: the CUDA backend's plans (ops/lstm/lstm.h), each named once.
std::string lstm_plans_text() {
  std::string out;
  for (const std::string& p : lstm_cuda_plans())
    if (out.find(p) == std::string::npos) out += (out.empty() ? "" : ", ") + p;
  return out;
}
}  // namespace

Run::Run(RunConfig c) : c_(std::move(c)) {
  if (c_.epochs <= 0) c_.epochs = c_.model.recipe.epochs;
  if (c_.batch <= 0) c_.batch = c_.model.recipe.batch;
  if (!c_.trainer.precision) c_.trainer.precision = loupe::precision();
  if (c_.world) c_.trainer.comm = &c_.world->comm();
  if (!c_.save_keras.empty()) models::check_keras_savable(c_.model, "--save-keras " + c_.save_keras);
  if (c_.threads) set_num_threads(*c_.threads);
  load_input();
  make_session();
  make_monitor();
  make_header();
  if (!c_.device.is_cuda() && !c_.threads && !num_threads_from_env()) add(std::make_shared<ThreadGovernor>());
}

Run::~Run() = default;

train::Trainer& Run::trainer() { return session_->trainer(); }

int64_t Run::epoch_steps() const {
  const loader::Shard shard = c_.world ? loader::Shard{c_.world->rank(), c_.world->size()} : loader::Shard{};
  return dl_ ? train::Trainer::epoch_steps(*dl_, c_.max_steps)
             : train::Trainer::epoch_steps(data_.train.size(), c_.batch, c_.max_steps, shard);
}

// The data set and, unless it is resident, the loader that feeds it.
void Run::load_input() {
  DataRequest r = c_.data;
  r.resident = c_.feed.resident;
  data_ = c_.loaded ? *c_.loaded : load_data(r, c_.device);
  pipeline_ = "whole training set resident on " + c_.device.str() + ", batches gathered by index";
  if (c_.feed.resident || !data_.host) return;  // no host set: a regression's targets stay resident
  loader::LoaderOptions lo;
  lo.batch = c_.batch;
  lo.workers = c_.feed.workers;
  lo.prefetch = c_.feed.prefetch;
  lo.pin_memory = c_.feed.pin_memory;
  lo.drop_last = c_.feed.drop_last;
  lo.seed = c_.seed;
  lo.device = c_.device;
  if (c_.world) lo.shard = loader::Shard{c_.world->rank(), c_.world->size()};
  dl_ = std::make_unique<loader::DataLoader>(data_.host, lo);
  pipeline_ = "loader: " + std::to_string(lo.workers) + " workers, prefetch " + std::to_string(lo.prefetch) +
              (c_.device.is_cuda() ? (lo.pin_memory ? ", pinned host slots" : ", pageable host slots") : "") +
              (lo.drop_last ? ", drop-last" : "");
}

// The model on the device with its optimizer, continued from the checkpoint to resume when given.
void Run::make_session() {
  models::SessionOptions so;
  so.device = c_.device;
  so.trainer = c_.trainer;
  so.lr = c_.lr.value_or(0);
  so.seed = c_.seed;
  so.vocab = data_.vocab;
  so.chars = data_.chars;  // saved with the weights; a resume whose table differs is refused
  so.words = data_.words;
  so.channels_last = c_.channels_last;
  so.batch = c_.batch;  // the memory check counts the activations at it (models/memory.h)
  session_ = std::make_unique<models::Session>(c_.model, so);
  history_ = std::make_unique<train::EpochHistory>();
  trainer().control().watch(c_.interrupt);
  if (!c_.keras_weights.empty() && !c_.resume.empty()) throw Error("--weights and --resume both give the weights: give one");
  // A .keras file's own weights unless others are given.
  const std::string weights = !c_.keras_weights.empty() ? c_.keras_weights : c_.resume.empty() ? c_.model.own_weights : "";
  if (!weights.empty()) {
    models::load_keras_weights_file(session_->model(), c_.model, weights);
    session_->model().arena().refresh_compute_copy();  // the trainer's 16-bit copy was made from the old ones
    trainer().broadcast_weights();
    info_.header.push_back({"", "weights from " + weights + " (Keras)"});
  }
  if (c_.resume.empty()) return install_schedule();
  train::CheckpointMeta m = session_->resume(c_.resume);
  session_->model().arena().refresh_compute_copy();
  trainer().broadcast_weights();  // data parallelism: rank 0's, though all read one file
  if (m.epoch >= c_.epochs)
    throw Error("checkpoint '" + c_.resume + "' has already completed " + std::to_string(m.epoch) + " of the " +
                std::to_string(c_.epochs) + " epochs asked for: nothing to resume (--epochs N with N > " +
                std::to_string(m.epoch) + " trains further; loupe eval --checkpoint evaluates it)");
  info_.header.push_back({"", "resumed from " + c_.resume + " after epoch " + std::to_string(m.epoch)});
  if (!session_->unchecked_vocabulary().empty()) info_.warnings.push_back(session_->unchecked_vocabulary());
  install_schedule();  // after the resume: the curve goes on from the checkpoint's update count
}

// The schedule asked for, or the model file's, on the optimizer before its first update: its
// initial rate is the base rate, and a per-epoch schedule counts this run's steps per epoch.
void Run::install_schedule() {
  std::optional<train::LrSchedule> s = c_.lr_schedule;
  if (!s && c_.model.recipe.schedule.kind != train::LrSchedule::Kind::Constant) {
    s = c_.model.recipe.schedule;
    if (c_.lr) s->initial = *c_.lr;
  }
  if (!s) return;
  optim::Optimizer& opt = session_->optimizer();
  opt.set_lr(s->initial);
  opt.set_schedule(train::lr_curve(*s, double(std::max<int64_t>(1, epoch_steps()))));
  scheduled_ = true;
}

// The monitor and the run's own observers: the profiler's range and the trace window, then the
// monitor's timings.
void Run::make_monitor() {
  c_.monitor.precision = *c_.trainer.precision;
  c_.monitor.nccl = c_.world != nullptr;
  timeline_peers(c_, c_.monitor);
  monitor_ = std::make_unique<instrument::EpochMonitor>(c_.device, c_.monitor);
  const auto [first, last] = c_.profile_steps;
  if (first > 0) add(std::make_shared<train::ProfilerRange>(c_.device, first, last));
  if (!c_.trace.empty()) {
    auto trace = std::make_shared<train::TraceWindow>(c_.trace, *monitor_, c_.device, first, last);
    trace_ = trace.get();
    add(trace);
  }
  add(std::make_shared<train::MonitorObserver>(*monitor_));
  if (c_.save_best && !c_.save.empty()) add(std::make_shared<BestCheckpoint>(c_.save, c_.save_monitor));
  session_->continue_global_step(epoch_steps());
}

void Run::make_header() {
  models::Session& s = *session_;
  const models::ModelInfo& m = c_.model;
  optim::Optimizer& opt = s.optimizer();
  info_.model = &c_.model;
  info_.parameters = s.model().num_parameters();
  info_.device = c_.device;
  info_.precision = *c_.trainer.precision;
  info_.epochs = c_.epochs;
  info_.first_epoch = s.resumed_epochs() + 1;
  info_.batch = c_.batch;
  info_.steps_per_epoch = epoch_steps();
  info_.lr = s.lr();
  info_.world = c_.world ? c_.world->size() : 1;
  auto& h = info_.header;
  const int64_t keras = m.keras_parameters;
  h.push_back({"model", m.name + ": " + m.description + ", " + instrument::thousands(double(info_.parameters)) +
                            " parameters" +
                            (keras && keras != info_.parameters
                                 ? " (Keras counts " + instrument::thousands(double(keras)) + ": " + m.keras_parameters_why + ")"
                                 : "")});
  h.push_back({"device", device_description(c_.device)});
  h.push_back({"data", data_.description});
  h.push_back({"input", pipeline_});
  if (c_.max_steps >= 0) {  // a quick check: its evaluation is bounded too
    const int64_t n = data_.test.size(), k = trainer().eval_samples(n, kEvalBatch, c_.max_steps);
    if (k < n)
      h.push_back({"eval", "the first " + std::to_string(k) + " of " + std::to_string(n) + " test samples (--max-steps " +
                               std::to_string(c_.max_steps) + ": at most that many batches of " +
                               std::to_string(kEvalBatch) + (c_.world ? " on each GPU" : "") + ")"});
  }
  char recipe[256];
  std::snprintf(recipe, sizeof recipe, "%s lr %g%s, batch %lld, epochs %d, seed %llu, precision %s%s", opt.name().c_str(),
                s.lr(), opt.decay() > 0 ? (", decay " + fmt_g(opt.decay()) + " per update").c_str() : "",
                (long long)c_.batch, c_.epochs, (unsigned long long)s.seed(), precision_name(*c_.trainer.precision),
                s.channels_last() ? ", channels-last" : "");
  h.push_back({"recipe", std::string(recipe) + (c_.lr_schedule_text.empty() ? "" : ", lr schedule " + c_.lr_schedule_text)});
  if (!m.recipe_source.empty()) h.push_back({"", "        (" + m.recipe_source + ")"});
  if (c_.world)
    h.push_back({"world", std::to_string(c_.world->size()) + " ranks (NCCL), batch " + std::to_string(c_.batch) +
                              " per GPU = " + std::to_string(c_.batch * c_.world->size()) +
                              " per step; gradients averaged during backward, in buckets cut at the first step where "
                              "backward finishes them (the world line names them)"});
  h.push_back({"step", trainer().step_mode()});
  hard_lstms_ = hard_sigmoid_lstms(s.model());
  if (!hard_lstms_.empty())
    h.push_back({"lstm", hard_lstms_ + ": Keras's hard_sigmoid gates of that slope, on loupe's " +
                             (c_.device.is_cuda() ? "own kernels, never cuDNN's (it has only the sigmoid)" : "CPU kernels")});
  if (std::string t = monitor_->timeline_note(); !t.empty()) h.push_back({"timeline", t});
}

void Run::add(std::shared_ptr<train::Observer> o) {
  trainer().observe(*o);
  observers_.push_back(std::move(o));
}

void Run::note(const std::string& line) {
  for (const auto& o : observers_) o->note(line);
}

void Run::stop_feed() {
  if (dl_) dl_->stop();
}

train::EpochStats Run::train_epoch(int e) { return train_epoch(e, c_.max_steps); }

train::EpochStats Run::train_epoch(int e, int64_t max_steps) {
  return dl_ ? trainer().train_epoch(*dl_, e, max_steps, e < c_.epochs)
             : trainer().train_epoch(data_.train, c_.batch, session_->seed(), e, max_steps);
}

instrument::EpochReport Run::measure(int e, int64_t steps, bool evaluate) {
  std::vector<instrument::EpochReport> parts;
  double t0 = -1;
  for (int64_t done = 0; done < steps && e <= c_.epochs; ++e) {
    train::EpochStats st = train_epoch(e, steps - done);
    if (st.interrupted) throw train::Interrupted();
    parts.push_back(epoch_report(c_.model.name, c_.device, c_.batch, st, c_.epochs));
    monitor_->fill(parts.back());
    if (t0 < 0) t0 = monitor_->train_begin();
    if (st.steps == 0) break;
    done += st.steps;
    if (evaluate && done < steps) trainer().evaluate(data_.test, kEvalBatch, c_.max_steps);
  }
  if (parts.empty()) throw Error("measure: epoch " + std::to_string(e) + " is past the run's " + std::to_string(c_.epochs));
  instrument::EpochReport r = stretch_report(parts);
  monitor_->fill_gpu(r, t0, monitor_->train_end());
  r.seed = session_->seed();
  r.advice = instrument::advise(r, advice_inputs(c_));
  return r;
}

RunResult Run::run() {
  RunResult result;
  result.accuracy = train::has_accuracy(c_.model.recipe.loss);
  for (const auto& o : observers_) o->run_begin(info_);
  const int64_t first_step = trainer().global_step();
  const double t0 = now_s();
  for (int e = info_.first_epoch; e <= c_.epochs; ++e) {
    if (std::optional<RunResult::End> end = epoch(e, result)) {
      result.end = *end;
      break;
    }
    if (trainer().control().stopped_by_observer()) {
      result.end = RunResult::End::Stopped;
      result.message = trainer().control().stop_reason();
      note("stopped " + result.message);
      break;
    }
  }
  if (trace_) trace_->finish(trainer(), trainer().global_step() - first_step);
  if (result.end != RunResult::End::Interrupted && result.end != RunResult::End::Diverged &&
      trainer().control().restore_asked() && !kept_.empty()) {
    NoGradGuard no_grad;
    nn::Module& m = session_->model();
    copy_(m.arena().values(), loupe::to(kept_[0], c_.device));
    size_t k = 1;
    for (auto& [name, b] : m.named_buffers()) copy_(b, loupe::to(kept_[k++], c_.device));
    m.arena().refresh_compute_copy();
    std::string where;
    if (!c_.save.empty() && !c_.save_best && saved_epoch_ != kept_epoch_)
      where = " (" + c_.save + " holds epoch " + std::to_string(saved_epoch_) + "'s; --save-best keeps the best epoch's)";
    if (kept_epoch_ != result.epochs_done) note("restored epoch " + std::to_string(kept_epoch_) + "'s weights" + where);
  }
  const bool whole = result.end != RunResult::End::Interrupted && result.end != RunResult::End::Diverged;
  if (!c_.save_keras.empty() && whole && (!c_.world || c_.world->rank() == 0)) {
    models::save_keras_file(session_->model(), c_.model, c_.save_keras);
    note("wrote " + c_.save_keras + " (Keras 3's .keras: the model's config and its weights)");
  }
  result.seconds = now_s() - t0;
  for (const auto& o : observers_) o->run_end(result);
  return result;
}

// Epoch e: training, evaluation, report. How the run ends, or nothing to go on.
std::optional<RunResult::End> Run::epoch(int e, RunResult& result) {
  monitor_->mark("epoch_start");
  train::EpochStats st = train_epoch(e);
  if (st.interrupted && trainer().control().stopped_by_observer()) {
    stop_feed();
    result.message = trainer().control().stop_reason() + " (in epoch " + std::to_string(e) + ", after " +
                     std::to_string(st.steps) + " steps: no checkpoint of the partial epoch)";
    note("stopped " + result.message);
    return RunResult::End::Stopped;
  }
  if (st.interrupted) {
    note("interrupted in epoch " + std::to_string(e) + " after " + std::to_string(st.steps) +
         " steps; stopping cleanly (no checkpoint of the partial epoch)");
    stop_feed();
    if (c_.world) c_.world->abort();  // the other ranks may be a step apart: no collective, no wait
    return RunResult::End::Interrupted;
  }
  if (st.diverged) {
    stop_feed();
    result.message = divergence_message(st, e, nullptr);
    return RunResult::End::Diverged;
  }
  if (!st.graph_event.empty()) note("step    " + st.graph_event);
  if (!st.precision_event.empty()) note("precision " + st.precision_event);
  if (!hard_lstms_.empty() && c_.device.is_cuda() && e == info_.first_epoch)
    note("lstm    ran on " + lstm_plans_text() + " (step: loupe's stepwise kernels; loupe16/loupe8: its persistent ones)");
  const double t0 = now_s();
  monitor_->mark("eval_start");
  try {
    st.test_acc = trainer().evaluate(data_.test, kEvalBatch, c_.max_steps);
    st.test_loss = trainer().last_eval_loss();
  } catch (const train::Interrupted&) {
    note("interrupted while evaluating epoch " + std::to_string(e) + "; stopping cleanly (no checkpoint of it)");
    stop_feed();
    if (c_.world) c_.world->abort();
    return RunResult::End::Interrupted;
  }
  st.eval_seconds = now_s() - t0;
  monitor_->mark("eval_end");
  // A finite divergence, judged before the report and the checkpoint: neither holds the epoch. Every
  // rank judges the world's loss and accuracy alike, so all stop here, none in a collective.
  const train::EpochJudgment j =
      train::judge_epoch(*history_, st.train_loss, st.test_acc, trainer().classes(), data_.test.size());
  if (j) {
    stop_feed();
    result.message = divergence_message(st, e, &j.what);
    return RunResult::End::Diverged;
  }
  history_->add(e, st.train_loss, st.test_acc);
  finish_epoch(st, e, result);
  monitor_->mark("epoch_end");  // appends the epoch's samples to the timeline
  return std::nullopt;
}

// The epoch's report (with the world's figures and the advice) to the observers, then what they
// asked for, and the epoch's checkpoint.
void Run::finish_epoch(train::EpochStats& st, int e, RunResult& result) {
  const double figure = result.accuracy ? st.test_acc : st.test_loss;
  if (result.accuracy || st.test_loss >= 0) {
    result.last = figure;
    const Monitor m = result.accuracy ? Monitor::TestAccuracy : Monitor::TestLoss;
    const std::optional<double> best = result.best_epoch > 0 ? std::optional<double>(result.best) : std::nullopt;
    if (figure >= 0 && improves(m, figure, best, 0)) {
      result.best = figure;
      result.best_epoch = e;
    }
  }
  instrument::EpochReport r = epoch_report(c_.model.name, c_.device, c_.batch, st, c_.epochs);
  r.seed = session_->seed();
  r.lr = scheduled_ ? session_->optimizer().current_lr() : session_->optimizer().lr();
  monitor_->fill(r);
  std::string world_line;  // a collective: every rank, here, once per epoch
  instrument::AdviceInputs adv = advice_inputs(c_);
  if (c_.world) {
    // Resident data: the batch is a slice on the host, never a wait for the GPU.
    world_line = c_.world->fill(r, *trainer().reducer(), c_.baseline, !dl_);
    adv.straggler = c_.world->straggler();
  }
  r.advice = instrument::advise(r, adv);
  result.epochs_done = e;
  result.reports.push_back(r);
  CriticalSection writing;  // Ctrl-C now waits for the records and the checkpoint
  for (const auto& o : observers_) o->epoch_end(r, trainer().control());
  if (!world_line.empty()) note(world_line);
  carry_out(e);
}

// What the observers asked for at the epoch's end: the weights kept, checkpoints, a new rate.
void Run::carry_out(int e) {
  train::Control& control = trainer().control();
  if (control.take_keep()) {
    NoGradGuard no_grad;
    nn::Module& m = session_->model();
    // A copy on the host: from a GPU the transfer is one; on the CPU it must be cloned.
    auto host_copy = [&](const Tensor& x) { return c_.device.is_cuda() ? loupe::to(x, kCPU) : clone(x); };
    kept_ = {host_copy(m.arena().values())};
    for (auto& [name, b] : m.named_buffers()) kept_.push_back(host_copy(b));
    kept_epoch_ = e;
  }
  std::vector<std::string> saves = control.take_saves();
  if (!c_.save.empty() && !c_.save_best) saves.insert(saves.begin(), c_.save);
  for (const std::string& path : saves) {
    NvtxRange ck("checkpoint");
    monitor_->mark("checkpoint");
    session_->save(path, e);
    if (path == c_.save) saved_epoch_ = e;
  }
  trainer().apply_lr();
  for (const std::string& n : control.take_notes()) note(n);
}

// Divergence, said once with what is kept and what to try: a NaN or infinite loss seen during the
// epoch, or a finite one judged at its end (finite: what was judged).
std::string Run::divergence_message(const train::EpochStats& st, int e, const std::string* finite) const {
  const std::string& save = c_.save;
  const double lr = session_->lr();
  std::string kept;
  if (!save.empty() && saved_epoch_ > 0)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(saved_epoch_) + ") is kept as it was";
  else if (!save.empty() && c_.resume == save)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(session_->resumed_epochs()) + ") is kept as it was";
  else if (!save.empty())
    kept = "nothing was written to " + save;
  else
    kept = "no checkpoint was asked for (--save)";
  const std::string what =
      finite ? *finite + ", so the run stopped after it (no checkpoint of it)"
             : "the loss became NaN or infinite by step " + std::to_string(st.diverged_step) + ", so the run stopped there";
  std::string m = "training diverged in epoch " + std::to_string(e) + ": " + what + "; " + kept +
                  ". To try:\n  - a lower learning rate: --lr " + fmt_g(lr / 10) + " (a tenth of this run's " +
                  fmt_g(lr) + "; the recipe's is " + fmt_g(c_.model.recipe.lr) + ")";
  if (finite) return m;  // the rest are causes of NaN and infinity
  if (*c_.trainer.precision == Precision::FP16)
    m += "\n  - float16 overflows above 65504 in the forward pass, which loss scaling cannot help: "
         "--precision bf16 (float32's range) or fp32";
  return m + "\n  - a NaN or infinite value in the input data does the same: check the data set";
}

}  // namespace loupe::run
