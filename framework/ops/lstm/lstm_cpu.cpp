// The CPU LSTM: per pseudo-layer one GEMM x W^T over all N*T rows, then per time step a GEMM
// h_{t-1} R^T into the same rows and the gate math; backward is BPTT with one GEMM per step for
// the recurrent gradient and three GEMMs over all rows for dW, dR and the input gradient.
//
// Every [N, T, ...] buffer below is batch-first like x and y (row n * T + t), so a time step is a
// strided [N, k] matrix (row stride T * k) that the GEMM reads and writes in place.
//
// `saved` (1-D, x's dtype), in order:
//   per pseudo-layer pl = layer * D + direction:
//     gates[pl]  [N, T, 4H]  the activations i, f, g, o (after sigmoid / tanh) of every step
//     cells[pl]  [N, T, H]   c_t of every step
//   outs[l]  [N, T, D*H]  for l = 0 .. L-2: layer l's output h (before dropout); the last layer's is y
//   ins[l]   [N, T, D*H]  for l = 1 .. L-1, only with dropout: layer l's input, outs[l-1] after it
// Dropout masks are not stored: like the dropout op, element j of layer l's output is kept when
// philox_uniform(seed, offset, l * N*T*D*H + j) >= p, and backward draws them again.
#include <algorithm>
#include <memory>
#include <vector>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/dropout_mask.h"
#include "core/thread_pool.h"
#include "ops/backend/gemm_cpu.h"
#include "ops/lstm/lstm.h"
#include "ops/lstm/lstm_gates_cpu.h"
#include "ops/view.h"

namespace loupe {
namespace {

// Sizes of one call and where each piece lies in `saved` (training) or in a smaller scratch
// buffer (inference: one pseudo-layer's gates and cells, reused, and ping-ponged layer outputs).
struct Plan {
  int64_t N, T, H, D, L;
  bool dropout, keep;  // keep: lay out everything backward needs
  int64_t nt() const { return N * T; }
  int64_t layer_out() const { return N * T * D * H; }
  int64_t pseudo() const { return N * T * 5 * H; }
  int64_t gates(int pl) const { return keep ? pl * pseudo() : 0; }
  int64_t cells(int pl) const { return gates(pl) + N * T * 4 * H; }
  int64_t outs_base() const { return keep ? L * D * pseudo() : pseudo(); }
  // Layer l < L-1's output; inference alternates two buffers.
  int64_t out(int l) const { return outs_base() + (keep ? l : l % 2) * layer_out(); }
  int64_t in(int l) const {  // l >= 1, dropout only
    return keep ? outs_base() + (L - 1 + l - 1) * layer_out() : outs_base() + 2 * layer_out();
  }
  int64_t total() const {
    if (keep) return L * D * pseudo() + (L - 1) * layer_out() * (dropout ? 2 : 1);
    return pseudo() + (L > 1 ? 3 * layer_out() : 0);
  }
};

Plan make_plan(const LstmParams& p, const Tensor& x, bool keep) {
  Plan q;
  q.N = x.size(0);
  q.T = x.size(1);
  q.H = p.hidden_size;
  q.D = p.directions();
  q.L = p.num_layers;
  q.dropout = p.dropout > 0 && p.num_layers > 1;
  q.keep = keep;
  return q;
}

// out[j] = in[j] * scale where mask element base + j is kept, else 0 (in place allowed).
template <class T>
void apply_mask(T* out, const T* in, int64_t n, uint64_t base, float p, uint64_t seed, uint64_t offset) {
  T scale = T(1) / (T(1) - T(p));
  parallel_for(0, n, cpu::kGrain, [&](int64_t s, int64_t e) {
    DropoutMask mask(seed, offset, p);
    for (int64_t j = s; j < e; ++j) out[j] = mask.keep(base + uint64_t(j)) ? in[j] * scale : T(0);
  });
}

// Rows of the batch per thread for the recurrence: all of them split evenly over the pool, but no
// fewer than 4 rows a thread (a GEMM of fewer rows runs far below the core's speed).
int64_t rows_per_thread(int64_t N) { return std::max<int64_t>(4, N / num_threads()); }

template <class T>
void forward_impl(const LstmParams& p, const Plan& q, const T* x, const T* w, T* y, T* hn, T* cn, T* buf,
                  uint64_t seed, uint64_t offset) {
  const int64_t N = q.N, Tn = q.T, H = q.H, D = q.D, DH = D * H, G4 = 4 * H;
  std::vector<T> bias(static_cast<size_t>(G4));
  for (int l = 0; l < q.L; ++l) {
    const int64_t in_size = l == 0 ? p.input_size : DH;
    const T* in = l == 0 ? x : q.dropout ? buf + q.in(l) : buf + q.out(l - 1);
    T* out = l == q.L - 1 ? y : buf + q.out(l);
    for (int d = 0; d < D; ++d) {
      const int pl = l * int(D) + d;
      LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      const T* W = w + o.w;
      const T* R = w + o.r;
      for (int64_t k = 0; k < G4; ++k) bias[size_t(k)] = w[o.b_w + k] + w[o.b_r + k];
      T* gates = buf + q.gates(pl);
      T* cells = buf + q.cells(pl);
      cpu::gemm<T>(false, true, q.nt(), G4, in_size, T(1), in, in_size, W, in_size, T(0), gates, G4);
      // The recurrence couples the steps, never the rows: each thread runs every step for its own
      // rows of the batch (its recurrent GEMM inline, single-threaded), so the pool is entered once
      // per pseudo-layer instead of twice per step (at 16 threads those hand-offs were most of it).
      parallel_for(0, N, rows_per_thread(N), [&](int64_t n0, int64_t n1) {
        for (int64_t s = 0; s < Tn; ++s) {
          const int64_t t = d == 0 ? s : Tn - 1 - s, tp = d == 0 ? t - 1 : t + 1;  // tp: the step before
          if (s > 0)
            cpu::gemm<T>(false, true, n1 - n0, G4, H, T(1), out + (n0 * Tn + tp) * DH + d * H, Tn * DH, R, H, T(1),
                         gates + (n0 * Tn + t) * G4, Tn * G4);
          for (int64_t n = n0; n < n1; ++n)
            lstm_cpu::gates_forward(gates + (n * Tn + t) * G4, bias.data(), s > 0 ? cells + (n * Tn + tp) * H : nullptr,
                          cells + (n * Tn + t) * H, out + (n * Tn + t) * DH + d * H, H, T(p.hard_slope));
        }
      });
      const int64_t last = d == 0 ? Tn - 1 : 0;  // direction 1 ends after t = 0
      for (int64_t n = 0; n < N; ++n) {
        std::copy_n(out + (n * Tn + last) * DH + d * H, H, hn + (pl * N + n) * H);
        std::copy_n(cells + (n * Tn + last) * H, H, cn + (pl * N + n) * H);
      }
    }
    if (q.dropout && l < q.L - 1)
      apply_mask(buf + q.in(l + 1), out, q.layer_out(), uint64_t(l) * uint64_t(q.layer_out()), float(p.dropout), seed,
                 offset);
  }
}

Tensor lstm_forward(const ExecContext&, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
                    const Tensor& c, bool training, uint64_t seed, uint64_t offset) {
  Plan q = make_plan(p, x, training);
  Tensor buf = empty(Shape{q.total()}, x.dtype(), x.device());
  cpu::dispatch_floating(x.dtype(), "lstm", [&](auto tag) {
    using T = decltype(tag);
    forward_impl<T>(p, q, x.data<T>(), w.data<T>(), y.data<T>(), h.data<T>(), c.data<T>(), buf.data<T>(), seed,
                    offset);
  });
  return training ? buf : Tensor();
}

template <class T>
void backward_impl(const LstmParams& p, const Plan& q, const T* x, const T* w, const T* y, const T* saved,
                   const T* dy, const T* dhn, const T* dcn, T* dx, T* dw, uint64_t seed, uint64_t offset) {
  const int64_t N = q.N, Tn = q.T, H = q.H, D = q.D, DH = D * H, G4 = 4 * H;
  // Every element is written before it is read: left uninitialised (zeroing them cost ~3 % of a step).
  std::unique_ptr<T[]> dgates(new T[size_t(q.nt() * G4)]), hprev(new T[size_t(q.nt() * H)]);
  std::vector<T> dh_rec(size_t(N * H)), dc_rec(size_t(N * H));
  // Gradients of the layer outputs and inputs between layers (ping-pong).
  std::vector<T> grad_a(q.L > 1 ? size_t(q.layer_out()) : 0), grad_b(grad_a.size());
  T* d_out_next = grad_a.data();
  for (int l = int(q.L) - 1; l >= 0; --l) {
    const int64_t in_size = l == 0 ? p.input_size : DH;
    const T* in = l == 0 ? x : q.dropout ? saved + q.in(l) : saved + q.out(l - 1);
    const T* out = l == q.L - 1 ? y : saved + q.out(l);
    const T* d_out = l == q.L - 1 ? dy : d_out_next;
    T* d_in = l == 0 ? dx : (d_out == grad_a.data() ? grad_b.data() : grad_a.data());
    for (int d = 0; d < D; ++d) {
      const int pl = l * int(D) + d;
      LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      const T* W = w + o.w;
      const T* R = w + o.r;
      const T* gates = saved + q.gates(pl);
      const T* cells = saved + q.cells(pl);
      T* dg = dgates.get();
      if (dhn) std::copy_n(dhn + pl * N * H, N * H, dh_rec.data());
      else std::fill(dh_rec.begin(), dh_rec.end(), T(0));
      if (dcn) std::copy_n(dcn + pl * N * H, N * H, dc_rec.data());
      else std::fill(dc_rec.begin(), dc_rec.end(), T(0));
      // As in forward: every step for one thread's rows, the recurrent gradient's GEMM inline.
      parallel_for(0, N, rows_per_thread(N), [&](int64_t n0, int64_t n1) {
        for (int64_t s = Tn - 1; s >= 0; --s) {
          const int64_t t = d == 0 ? s : Tn - 1 - s, tp = d == 0 ? t - 1 : t + 1;
          for (int64_t n = n0; n < n1; ++n) {
            const int64_t row = n * Tn + t;
            lstm_cpu::gates_backward(gates + row * G4, cells + row * H, s > 0 ? cells + (n * Tn + tp) * H : nullptr,
                           d_out + row * DH + d * H, dh_rec.data() + n * H, dc_rec.data() + n * H, dg + row * G4, H,
                           T(p.hard_slope));
          }
          // The gradient reaching h of the step before, through R.
          if (s > 0)
            cpu::gemm<T>(false, false, n1 - n0, H, G4, T(1), dg + (n0 * Tn + t) * G4, Tn * G4, R, H, T(0),
                         dh_rec.data() + n0 * H, H);
        }
        // h_{t-1} next to each step's row (zero for the first step), so dR is one GEMM over all rows.
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t t = 0; t < Tn; ++t) {
            const int64_t tp = d == 0 ? t - 1 : t + 1;
            T* hp = hprev.get() + (n * Tn + t) * H;
            if (tp < 0 || tp >= Tn) std::fill_n(hp, H, T(0));
            else std::copy_n(out + (n * Tn + tp) * DH + d * H, H, hp);
          }
      });
      cpu::gemm<T>(true, false, G4, in_size, q.nt(), T(1), dg, G4, in, in_size, T(0), dw + o.w, in_size);
      cpu::gemm<T>(true, false, G4, H, q.nt(), T(1), dg, G4, hprev.get(), H, T(0), dw + o.r, H);
      T* db = dw + o.b_w;
      parallel_for(0, G4, 16, [&](int64_t k0, int64_t k1) {  // columns per thread: the same sums in the same order
        std::fill(db + k0, db + k1, T(0));
        for (int64_t r = 0; r < q.nt(); ++r)
          for (int64_t k = k0; k < k1; ++k) db[k] += dg[r * G4 + k];
      });
      std::copy_n(db, G4, dw + o.b_r);  // b_W and b_R enter the gates identically
      // Both directions read the same layer input: the second one accumulates.
      cpu::gemm<T>(false, false, q.nt(), in_size, G4, T(1), dg, G4, W, in_size, T(d == 0 ? 0 : 1), d_in, in_size);
    }
    if (l > 0) {
      if (q.dropout)
        apply_mask(d_in, d_in, q.layer_out(), uint64_t(l - 1) * uint64_t(q.layer_out()), float(p.dropout), seed,
                   offset);
      d_out_next = d_in;
    }
  }
}

void lstm_backward(const ExecContext&, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                   const Tensor& saved, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
                   const Tensor& dw, uint64_t seed, uint64_t offset, bool weights_later) {
  LOUPE_CHECK(!weights_later, "lstm backward on the CPU has one round only");
  Plan q = make_plan(p, x, true);
  LOUPE_CHECK(saved.defined() && saved.numel() == q.total(), "lstm backward: no saved forward state of the ",
              "expected size (was the forward run with training = false?)");
  Tensor dyc = dy.defined() ? contiguous(dy) : zeros(y.shape(), y.dtype(), y.device());
  Tensor dxc = dx.defined() ? dx : empty(x.shape(), x.dtype(), x.device());  // written either way
  cpu::dispatch_floating(x.dtype(), "lstm", [&](auto tag) {
    using T = decltype(tag);
    backward_impl<T>(p, q, x.data<T>(), w.data<T>(), y.data<T>(), saved.data<T>(), dyc.data<T>(),
                     dh.defined() ? dh.data<T>() : nullptr, dc.defined() ? dc.data<T>() : nullptr, dxc.data<T>(),
                     dw.data<T>(), seed, offset);
  });
}

const LstmKernels table{lstm_forward, lstm_backward, nullptr};  // one round: no DDP on the CPU
const RegisterBackend<LstmKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
