// float32 CPU convolutions through oneDNN (LOUPE_WITH_DNNL; Debian's libdnnl-dev, the 2.x API):
// its JIT kernels (direct convolution in blocked layouts, AVX-512 where there is AVX-512), as
// PyTorch's CPU convolutions. loupe's tensors stay NCHW / OIHW; oneDNN picks its internal layouts
// (format_tag::any) and reorders run in and out where its choice differs, or (`any` false) it works
// on the plain layouts directly. The im2col path (conv_cpu.cpp) stays for float64 and builds
// without oneDNN.
#include "ops/conv_cpu.h"

#if LOUPE_WITH_DNNL
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "core/thread_pool.h"
#include "ops/backend/dnnl_threads.h"

namespace loupe::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& dnnl_stream() {
  static dnnl::stream s(engine());
  return s;
}

// One step of a direction: an internal buffer in oneDNN's layout and the reorder between it and
// loupe's plain one; none when the layouts agree (then the user's memory is used directly).
struct Staged {
  memory user;                     // plain NCHW / OIHW; its data handle set per call
  std::optional<memory> internal;  // oneDNN's layout, when it differs
  std::optional<dnnl::reorder> reorder;

  Staged(const memory::desc& plain, const memory::desc& chosen, bool input) : user(plain, engine(), nullptr) {
    if (chosen == plain) return;
    internal.emplace(chosen, engine());
    reorder.emplace(input ? dnnl::reorder(user, *internal) : dnnl::reorder(*internal, user));
  }
  // The memory the convolution reads or writes; for an input, after reordering `data` into it.
  memory& bind(const Tensor& t) {
    user.set_data_handle(t.data<float>());
    return internal ? *internal : user;
  }
  void in() {
    if (reorder) reorder->execute(dnnl_stream(), user, *internal);
  }
  void out() {
    if (reorder) reorder->execute(dnnl_stream(), *internal, user);
  }
};

// The shapes and parameters a primitive is made for, and the thread count: oneDNN fixes a
// primitive's team when it makes it, so a pool resized between steps (run/threads.h) needs its own.
// direction: 0 forward, 1 backward of the weights only, 2 backward of data and weights, 3 backward
// of the data only.
using Key = std::array<int64_t, 14>;

struct Shapes {
  memory::dims x, w, y, strides, pad_l, pad_r;
};

struct Forward {
  dnnl::convolution_forward prim;
  Staged x, w, y;
  memory scratch;
  Forward(const dnnl::convolution_forward::primitive_desc& pd, const Shapes& s)
      : prim(pd),
        x({s.x, memory::data_type::f32, Tag::nchw}, pd.src_desc(), true),
        w({s.w, memory::data_type::f32, Tag::oihw}, pd.weights_desc(), true),
        y({s.y, memory::data_type::f32, Tag::nchw}, pd.dst_desc(), false),
        scratch(pd.scratchpad_desc(), engine()) {}
};

// The backward of both: gy is reordered once where both primitives want it in the same layout.
struct Backward {
  std::optional<dnnl::convolution_backward_data> data_prim;
  std::optional<dnnl::convolution_backward_weights> weights_prim;
  std::optional<Staged> gx, w, gy_data;      // for the data gradient
  std::optional<Staged> x, gw, gy_weights;   // for the weight gradient
  bool gy_shared = false;                     // gy_weights reads gy_data's buffer
  std::optional<memory> data_scratch, weights_scratch;
};

struct Entry {
  std::optional<Forward> fwd;
  std::optional<Backward> bwd;
};

std::mutex g_cache_mutex;  // guards g_cache
std::map<Key, std::shared_ptr<Entry>> g_cache;
// One convolution through oneDNN at a time: the stream, the entries' buffers and scratch are
// shared. Each call already uses every thread loupe has, so nothing is lost.
std::mutex g_run_mutex;

Shapes shapes(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, bool* ok) {
  Shapes s;
  s.x = {x.size(0), x.size(1), x.size(2), x.size(3)};
  s.w = {w.size(0), w.size(1), w.size(2), w.size(3)};
  s.y = {y.size(0), y.size(1), y.size(2), y.size(3)};
  s.strides = {p.stride_h, p.stride_w};
  s.pad_l = {p.pad_h, p.pad_w};
  // loupe's output size rounds down; oneDNN wants the right padding that gives exactly that size
  // (negative where the stride leaves the last rows or columns unread: oneDNN takes that).
  s.pad_r = {(s.y[2] - 1) * p.stride_h + s.w[2] - s.x[2] - p.pad_h, (s.y[3] - 1) * p.stride_w + s.w[3] - s.x[3] - p.pad_w};
  *ok = x.numel() > 0 && w.numel() > 0 && y.numel() > 0;
  return s;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, allocated once per entry
  return a;
}

memory::desc md(const memory::dims& d, bool any, Tag plain) {
  return {d, memory::data_type::f32, any ? Tag::any : plain};
}

dnnl::convolution_forward::primitive_desc forward_pd(const Shapes& s, bool any) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                    md(s.x, any, Tag::nchw), md(s.w, any, Tag::oihw), md(s.y, any, Tag::nchw),
                                    s.strides, s.pad_l, s.pad_r);
  return {d, user_scratchpad(), engine()};
}

Backward make_backward(const Shapes& s, bool any, bool need_gx, bool need_gw) {
  const memory::desc px{s.x, memory::data_type::f32, Tag::nchw}, pw{s.w, memory::data_type::f32, Tag::oihw},
      py{s.y, memory::data_type::f32, Tag::nchw};
  auto hint = forward_pd(s, any);
  Backward b;
  if (need_gx) {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, md(s.x, any, Tag::nchw),
                                            md(s.w, any, Tag::oihw), md(s.y, any, Tag::nchw), s.strides, s.pad_l,
                                            s.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, user_scratchpad(), engine(), hint);
    b.data_prim.emplace(pd);
    b.gx.emplace(px, pd.diff_src_desc(), false);
    b.w.emplace(pw, pd.weights_desc(), true);
    b.gy_data.emplace(py, pd.diff_dst_desc(), true);
    b.data_scratch.emplace(pd.scratchpad_desc(), engine());
  }
  if (need_gw) {
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, md(s.x, any, Tag::nchw),
                                               md(s.w, any, Tag::oihw), md(s.y, any, Tag::nchw), s.strides,
                                               s.pad_l, s.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad(), engine(), hint);
    b.weights_prim.emplace(pd);
    b.x.emplace(px, pd.src_desc(), true);
    b.gw.emplace(pw, pd.diff_weights_desc(), false);
    b.gy_shared = need_gx && b.gy_data->internal && pd.diff_dst_desc() == b.gy_data->internal->get_desc();
    if (!b.gy_shared) b.gy_weights.emplace(py, pd.diff_dst_desc(), true);
    b.weights_scratch.emplace(pd.scratchpad_desc(), engine());
  }
  return b;
}

// The entry for these shapes, made on first use; null where oneDNN refuses them (then im2col).
std::shared_ptr<Entry> entry(const Key& key, const std::function<void(Entry&)>& make) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto it = g_cache.find(key);
  if (it != g_cache.end()) return it->second;
  // A few shapes per model and direction (training, evaluation, a last partial batch): a run
  // that keeps changing shapes starts over rather than holding every buffer it ever needed.
  if (g_cache.size() >= 64) g_cache.clear();
  std::shared_ptr<Entry> e = std::make_shared<Entry>();
  try {
    make(*e);
  } catch (const dnnl::error&) {
    e = nullptr;
  }
  g_cache.emplace(key, e);
  return e;
}

Key key_of(int direction, const Shapes& s, bool any) {
  return {direction, s.x[0], s.x[1], s.x[2], s.x[3], s.w[0], s.w[2], s.w[3], s.strides[0], s.strides[1],
          s.pad_l[0], s.pad_l[1], any ? 1 : 0, num_threads()};
}

}  // namespace

std::string dnnl_version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

namespace detail {

bool conv_forward_dnnl(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p, bool any) {
  bool ok = false;
  const Shapes s = shapes(x, w, y, p, &ok);
  if (!ok) return false;
  match_dnnl_threads();  // before the primitive is made: it keeps the team it was made for
  std::shared_ptr<Entry> e = entry(key_of(0, s, any), [&](Entry& e) { e.fwd.emplace(forward_pd(s, any), s); });
  if (!e) return false;
  std::lock_guard<std::mutex> run(g_run_mutex);
  Forward& f = *e->fwd;
  memory& xm = f.x.bind(x);
  memory& wm = f.w.bind(w);
  memory& ym = f.y.bind(y);
  f.x.in();
  f.w.in();
  f.prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym},
                                 {DNNL_ARG_SCRATCHPAD, f.scratch}});
  f.y.out();
  dnnl_stream().wait();
  return true;
}

bool conv_backward_dnnl(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                        const Conv2dParams& p, bool any) {
  const bool need_gx = gx.defined(), need_gw = gw.defined();
  if (!need_gx && !need_gw) return true;
  bool ok = false;
  const Shapes s = shapes(x, w, gy, p, &ok);
  if (!ok) return false;
  const int direction = need_gx && need_gw ? 2 : need_gx ? 3 : 1;
  match_dnnl_threads();
  std::shared_ptr<Entry> e = entry(key_of(direction, s, any),
                                   [&](Entry& e) { e.bwd.emplace(make_backward(s, any, need_gx, need_gw)); });
  if (!e) return false;
  std::lock_guard<std::mutex> run(g_run_mutex);
  Backward& b = *e->bwd;
  if (need_gx) {
    memory& gym = b.gy_data->bind(gy);
    memory& wm = b.w->bind(w);
    memory& gxm = b.gx->bind(gx);
    b.gy_data->in();
    b.w->in();
    b.data_prim->execute(dnnl_stream(), {{DNNL_ARG_DIFF_DST, gym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, gxm},
                                         {DNNL_ARG_SCRATCHPAD, *b.data_scratch}});
    b.gx->out();
  }
  if (need_gw) {
    memory* gym = nullptr;
    if (b.gy_shared) {
      gym = &*b.gy_data->internal;  // reordered above
    } else {
      gym = &b.gy_weights->bind(gy);
      b.gy_weights->in();
    }
    memory& xm = b.x->bind(x);
    memory& gwm = b.gw->bind(gw);
    b.x->in();
    b.weights_prim->execute(dnnl_stream(), {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, *gym}, {DNNL_ARG_DIFF_WEIGHTS, gwm},
                                            {DNNL_ARG_SCRATCHPAD, *b.weights_scratch}});
    b.gw->out();
  }
  dnnl_stream().wait();
  return true;
}

}  // namespace detail
}  // namespace loupe::cpu

#else  // no oneDNN: every float32 convolution takes the im2col path

namespace loupe::cpu {
std::string dnnl_version() { return ""; }
namespace detail {
bool conv_forward_dnnl(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&, bool) { return false; }
bool conv_backward_dnnl(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&,
                        bool) {
  return false;
}
}  // namespace detail
}  // namespace loupe::cpu

#endif
