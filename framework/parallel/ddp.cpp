#include "parallel/ddp.h"

#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/nvtx.h"
#include "ops/view.h"

namespace loupe::parallel {

ReducerOptions reducer_options_from_knobs() {
  ReducerOptions o;
  if (auto mb = knobs::integer("LOUPE_DDP_BUCKET_MB")) o.bucket_cap_bytes = *mb << 20;
  if (auto sms = knobs::integer("LOUPE_DDP_SM_CARVEOUT")) o.sm_carveout = int(*sms);
  return o;
}

GradReducer::GradReducer(const nn::ParameterArena& arena, Communicator& comm, ReducerOptions o)
    : arena_(arena), comm_(comm) {
  options_ = o;
  split_ = knobs::flag("LOUPE_DDP_SPLIT_BACKWARD");
  planned_ = !split_;
  const Tensor& grads = arena.grads();
  LOUPE_CHECK(grads.dtype() == DType::f32, "data-parallel training all-reduces float32 gradients");
  const char* base = static_cast<const char*>(grads.data_ptr());
  for (const Tensor& p : arena.params()) {
    const Tensor g = p.grad();
    LOUPE_CHECK(g.defined(), "a parameter without its view into the gradient arena");
    const int64_t off = (static_cast<const char*>(g.data_ptr()) - base) / int64_t(sizeof(float));
    LOUPE_CHECK(off >= 0 && off + g.numel() <= grads.numel(), "a parameter's gradient outside the arena");
    slot_of_[g.data_ptr()] = int(slots_.size());
    slots_.push_back({off, g.numel()});
  }
  adopt(plan_buckets(slots_, int64_t(sizeof(float)), o.bucket_cap_bytes, o.first_bucket_bytes));
  in_.assign(slots_.size(), 0);
  // Set here, not read by core: the carve-out is data parallelism's knob, its users are core's.
  if (o.sm_carveout && cuda_runtime()) cuda_runtime()->set_comm_sms(*o.sm_carveout);
}

void GradReducer::adopt(std::vector<Bucket> buckets) {
  buckets_ = std::move(buckets);
  bucket_of_.assign(slots_.size(), -1);
  range_names_.clear();
  bytes_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int i : buckets_[b].params) bucket_of_[size_t(i)] = int(b);
    bytes_ += buckets_[b].numel * int64_t(sizeof(float));
    range_names_.push_back("all-reduce bucket " + std::to_string(b));
  }
}

void GradReducer::replan() {
  planned_ = true;
  const int n = int(slots_.size());
  std::vector<char> got(slots_.size(), 0);
  for (int i : seen_) got[size_t(i)] = 1;
  std::vector<int> order = seen_;
  for (int i = n - 1; i >= 0; --i)  // no gradient in the first pass: last, as end() sends them
    if (!got[size_t(i)]) order.push_back(i);
  // Rank 0's order and pauses, [order..., paused after position k...], for every rank: one
  // synchronising broadcast, once, in the first (eager) step.
  std::vector<int32_t> wire(size_t(2 * n), 0);
  for (int k = 0; k < n; ++k) wire[size_t(k)] = order[size_t(k)];
  for (size_t p : pauses_)
    if (p >= 1 && p <= size_t(n)) wire[size_t(n) + p - 1] = 1;
  if (comm_.world() > 1) {
    Tensor t = from_vector(wire, Shape{2 * n}, arena_.grads().device());
    comm_.broadcast(t, 0);
    wire = t.to_vector<int32_t>();
  }
  std::vector<size_t> pauses;
  for (int k = 0; k < n; ++k) {
    order[size_t(k)] = wire[size_t(k)];
    if (wire[size_t(n + k)]) pauses.push_back(size_t(k + 1));
  }
  std::vector<Bucket> b = plan_buckets(slots_, order, pauses, int64_t(sizeof(float)), options_.bucket_cap_bytes,
                                       options_.first_bucket_bytes);
  seen_.clear();
  pauses_.clear();
  adopt(std::move(b));
}

GradReducer::~GradReducer() {
  if (open_) autograd::set_grad_ready_hook(prev_);
}

void GradReducer::begin() {
  LOUPE_CHECK(!open_, "GradReducer::begin() twice without end()");
  waiting_.clear();
  for (const Bucket& b : buckets_) waiting_.push_back(int(b.params.size()));
  std::fill(in_.begin(), in_.end(), 0);
  next_ = 0;
  open_ = true;
  prev_ = autograd::grad_ready_hook();
  autograd::set_grad_ready_hook(this);
}

void GradReducer::ready(const Tensor& grad) {
  auto it = slot_of_.find(grad.data_ptr());
  if (it == slot_of_.end()) return;  // a leaf that is not one of the parameters
  const int i = it->second;
  if (in_[size_t(i)]) return;  // a second contribution is added to the same slice before it goes
  in_[size_t(i)] = 1;
  if (!planned_) seen_.push_back(i);
  --waiting_[size_t(bucket_of_[size_t(i)])];
  send_ready();
}

void GradReducer::pause() {
  if (!planned_ && !seen_.empty() && (pauses_.empty() || pauses_.back() != seen_.size())) pauses_.push_back(seen_.size());
}

void GradReducer::send_ready() {
  const Tensor& grads = arena_.grads();
  while (next_ < buckets_.size() && waiting_[next_] == 0) {
    const Bucket& b = buckets_[next_];
    NvtxRange r(range_names_[next_].c_str());
    comm_.all_reduce_async(slice(grads, 0, b.offset, b.offset + b.numel), ReduceOp::Avg);
    ++next_;
  }
}

void GradReducer::end() {
  LOUPE_CHECK(open_, "GradReducer::end() without begin()");
  autograd::set_grad_ready_hook(prev_);
  open_ = false;
  for (int& w : waiting_) w = 0;  // parameters without a gradient this pass: their zeros are averaged
  send_ready();
  comm_.join();
  if (!planned_) replan();
}

std::string GradReducer::describe() const {
  std::string s = std::to_string(buckets_.size()) + (buckets_.size() == 1 ? " bucket (" : " buckets (");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.1f", b ? ", " : "", double(buckets_[b].numel) * 4.0 / (1 << 20));
    s += buf;
  }
  return s + " MiB) by NCCL";
}

}  // namespace loupe::parallel
