// The stepwise CUDA LSTM (ops/lstm/lstm_step.h), ops/lstm/lstm_cpu.cpp's algorithm step for step: per
// pseudo-layer one GEMM x W^T over all N*T rows, then per time step a GEMM h_{t-1} R^T accumulated
// into that step's rows and a pointwise kernel for the gates and the cell. Backward is BPTT: per
// step a pointwise kernel for the gate gradients and a GEMM for the gradient reaching h_{t-1}
// through R, then GEMMs over all rows for dW, dR and the input gradient, and a column sum for the
// biases. Pointwise arithmetic in float32 with accurate expf and tanhf; GEMMs in x's dtype.
//
// Every [N, T, ...] buffer is batch-first like x and y (row n * T + t), so a time step is a
// strided [N, k] matrix (row stride T * k) that the GEMMs read and write in place.
//
// `saved` (1-D bytes, every piece starting 256-byte aligned), in order:
//   gates[pl]  [N, T, 4H]   x's dtype, per pseudo-layer pl = layer * D + direction: the activations
//                           i, f, g, o (after sigmoid / hard sigmoid / tanh) of every step
//   cells[pl]  [N, T, H]    float32, per pseudo-layer: c_t of every step (float32 also in 16-bit
//                           dtypes: the cell is carried across steps unrounded)
//   outs[l]    [N, T, D*H]  x's dtype, for l = 0 .. L-2: layer l's output h; the last layer's is y
// Without training the scratch holds one pseudo-layer's gates and cells (reused) and two outs
// (alternating between layers).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/cuda_util.cuh"
#include "ops/linalg.h"
#include "ops/lstm/lstm_step.h"

namespace loupe::lstm_step {
namespace {

// The gates i, f, o: the logistic sigmoid, or with a slope Keras's hard_sigmoid (ops/lstm/lstm.h).
__device__ __forceinline__ float step_gate(float v, float slope) {
  return slope != 0.f ? fminf(fmaxf(slope * v + 0.5f, 0.f), 1.f) : 1.f / (1.f + expf(-v));
}
// Their derivative from the activation a, as the CPU takes it.
__device__ __forceinline__ float step_gate_slope(float a, float slope) {
  return slope != 0.f ? (a > 0.f && a < 1.f ? slope : 0.f) : a * (1.f - a);
}

// A hard gate's activation as saved in a 16-bit T: one strictly inside (0, 1) stays inside after
// rounding (the next value towards 0.5), or the backward would read its derivative as 0, not slope.
template <class T>
__device__ __forceinline__ T step_saved_gate(float a, float slope) {
  T r = cuda::from_float<T>(a);
  if constexpr (sizeof(T) == 2) {
    const float b = cuda::to_float(r);
    if (slope != 0.f && a > 0.f && a < 1.f && (b <= 0.f || b >= 1.f)) {
      uint16_t bits;  // positive: the bit pattern orders the values
      memcpy(&bits, &r, 2);
      bits = b <= 0.f ? uint16_t(1) : uint16_t(bits - 1);
      memcpy(&r, &bits, 2);
    }
  }
  return r;
}

template <class T>
struct CellFwd {
  T* gates;            // [N, T, 4H]: a step's pre-activations less the biases in, its activations out
  float* cells;        // [N, T, H]
  T* out;              // h_t at out + (n * T + t) * ld (already at the direction's column)
  int64_t ld;
  const T *b_w, *b_r;  // [4H]
  T *hn, *cn;          // [N, H]: the final states, written at the direction's last step
  int64_t N, steps, H;
  float slope;
};

// One step t of one direction (tp: the step before, < 0 at the first): every (row, unit).
template <class T>
__global__ void step_cell_forward(const CellFwd<T> a, int64_t t, int64_t tp, bool last) {
  const int64_t H = a.H;
  LOUPE_KERNEL_LOOP(i, a.N * H) {
    const int64_t n = i / H, j = i % H, row = n * a.steps + t;
    T* g = a.gates + row * 4 * H + j;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      v[k] = cuda::to_float(g[k * H]) + (cuda::to_float(a.b_w[k * H + j]) + cuda::to_float(a.b_r[k * H + j]));
    const float gi = step_gate(v[0], a.slope), gf = step_gate(v[1], a.slope), gg = tanhf(v[2]),
                go = step_gate(v[3], a.slope);
    const float cv = (tp >= 0 ? gf * a.cells[(n * a.steps + tp) * H + j] : 0.f) + gi * gg;
    const float hv = go * tanhf(cv);
    g[0] = step_saved_gate<T>(gi, a.slope);
    g[H] = step_saved_gate<T>(gf, a.slope);
    g[2 * H] = cuda::from_float<T>(gg);
    g[3 * H] = step_saved_gate<T>(go, a.slope);
    a.cells[row * H + j] = cv;
    const T ht = cuda::from_float<T>(hv);
    a.out[row * a.ld + j] = ht;
    if (last) {
      a.hn[n * H + j] = ht;
      a.cn[n * H + j] = cuda::from_float<T>(cv);
    }
  }
}

template <class T>
struct CellBwd {
  const T* gates;       // [N, T, 4H]: the activations
  const float* cells;   // [N, T, H]
  const T* dy;          // the gradient from above at dy + n * dy_n + t * dy_t + j * dy_k, or null
  int64_t dy_n, dy_t, dy_k;
  const T* dh;          // [N, H]: the gradient reaching h_t from the step after (or h's), or null
  const T* dc_final;    // [N, H]: c's gradient, read at the direction's last step; or null
  float* dc;            // [N, H]: the gradient reaching c_t in (but at the last step), c_{t-1}'s out
  T* dg;                // [N, T, 4H]: the gate gradients
  int64_t N, steps, H;
  float slope;
};

// The gate gradients of step t (tp: the step before, < 0 at the first; `last`: the direction's
// last step, where the final states' gradients come in), the equations of ops/lstm/lstm_gates_cpu.cpp.
template <class T>
__global__ void step_cell_backward(const CellBwd<T> a, int64_t t, int64_t tp, bool last) {
  const int64_t H = a.H;
  LOUPE_KERNEL_LOOP(i, a.N * H) {
    const int64_t n = i / H, j = i % H, row = n * a.steps + t;
    const T* g = a.gates + row * 4 * H + j;
    const float gi = cuda::to_float(g[0]), gf = cuda::to_float(g[H]), gg = cuda::to_float(g[2 * H]),
                go = cuda::to_float(g[3 * H]);
    const float tc = tanhf(a.cells[row * H + j]);
    float dh = a.dh ? cuda::to_float(a.dh[n * H + j]) : 0.f;
    if (a.dy) dh += cuda::to_float(a.dy[n * a.dy_n + t * a.dy_t + j * a.dy_k]);
    const float dc_in = last ? (a.dc_final ? cuda::to_float(a.dc_final[n * H + j]) : 0.f) : a.dc[n * H + j];
    const float dcv = dc_in + dh * go * (1.f - tc * tc);
    T* dg = a.dg + row * 4 * H + j;
    dg[0] = cuda::from_float<T>(dcv * gg * step_gate_slope(gi, a.slope));
    const float cp = tp >= 0 ? a.cells[(n * a.steps + tp) * H + j] : 0.f;
    dg[H] = cuda::from_float<T>((tp >= 0 ? dcv * cp : 0.f) * step_gate_slope(gf, a.slope));
    dg[2 * H] = cuda::from_float<T>(dcv * gi * (1.f - gg * gg));
    dg[3 * H] = cuda::from_float<T>(dh * tc * step_gate_slope(go, a.slope));
    a.dc[n * H + j] = dcv * gf;
  }
}

// hprev [N, T, H]: h_{t-1} of the direction (dir 1's is h_{t+1}) next to each step's row, zero at
// its first step, so that dR is one GEMM over all rows. out: the layer's output at the direction's
// column, row stride ld.
template <class T>
__global__ void step_shift_hidden(const T* out, int64_t ld, T* hprev, int64_t N, int64_t Tn, int64_t H, int dir) {
  LOUPE_KERNEL_LOOP(i, N * Tn * H) {
    const int64_t j = i % H, row = i / H, t = row % Tn, tp = dir == 0 ? t - 1 : t + 1;
    hprev[i] = tp >= 0 && tp < Tn ? out[(row - t + tp) * ld + j] : cuda::from_float<T>(0.f);
  }
}

// The bias gradient, the column sums of dg [rows, G], in two deterministic passes: block (32, 8)
// sums 32 columns over its chunk of rows into part [chunks, G], then step_bias_finish adds the chunks.
constexpr int kBiasRowsLanes = 8;
template <class T>
__global__ void step_bias_partial(const T* dg, int64_t rows, int64_t G, int64_t chunk, float* part) {
  __shared__ float sums[kBiasRowsLanes][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = min(rows, r0 + chunk);
  float v = 0.f;
  if (col < G)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kBiasRowsLanes) v += cuda::to_float(dg[r * G + col]);
  sums[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && col < G) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kBiasRowsLanes; ++k) s += sums[k][threadIdx.x];
    part[int64_t(blockIdx.y) * G + col] = s;
  }
}

// Both bias gradients of one pseudo-layer: b_W and b_R enter the gates identically.
template <class T>
__global__ void step_bias_finish(const float* part, int64_t chunks, int64_t G, T* db_w, T* db_r) {
  LOUPE_KERNEL_LOOP(col, G) {
    float s = 0.f;
    for (int64_t k = 0; k < chunks; ++k) s += part[k * G + col];
    db_w[col] = cuda::from_float<T>(s);
    db_r[col] = db_w[col];
  }
}

// Byte offsets of `saved`'s pieces (training: keep), or of the inference scratch's (the header).
struct StepLayout {
  bool keep = false;
  size_t gates_bytes = 0, cells_bytes = 0, out_bytes = 0, cells0 = 0, outs0 = 0, total = 0;
  StepLayout(const LstmParams& p, int64_t N, int64_t T, DType t, bool keep_all) : keep(keep_all) {
    auto up = [](size_t n) { return (n + 255) / 256 * 256; };
    const size_t rows = size_t(N * T), e = dtype_size(t), H = size_t(p.hidden_size), D = size_t(p.directions());
    const size_t L = size_t(p.num_layers), pseudo = keep ? L * D : 1, outs = keep ? L - 1 : (L > 1 ? 2 : 0);
    gates_bytes = up(rows * 4 * H * e);
    cells_bytes = up(rows * H * sizeof(float));
    out_bytes = up(rows * D * H * e);
    cells0 = pseudo * gates_bytes;
    outs0 = cells0 + pseudo * cells_bytes;
    total = std::max<size_t>(outs0 + outs * out_bytes, 1);
  }
  size_t gates(int pl) const { return keep ? size_t(pl) * gates_bytes : 0; }
  size_t cells(int pl) const { return cells0 + (keep ? size_t(pl) * cells_bytes : 0); }
  size_t out(int l) const { return outs0 + size_t(keep ? l : l % 2) * out_bytes; }
};

// Element type P at byte `at` of buf.
template <class P>
P* step_piece(const Tensor& buf, size_t at) {
  return reinterpret_cast<P*>(static_cast<char*>(buf.data_ptr()) + at);
}

// One direction's recurrence, its input projections already in a.gates.
template <class T>
void step_recurrence_forward(const ExecContext& ctx, CellFwd<T> a, const T* R, int dir, DType dt, cudaStream_t stream) {
  const int64_t N = a.N, Tn = a.steps, H = a.H, G4 = 4 * H;
  for (int64_t s = 0; s < Tn; ++s) {
    const int64_t t = dir == 0 ? s : Tn - 1 - s, tp = dir == 0 ? t - 1 : t + 1;  // tp: the step before
    if (s > 0)
      gemm_raw(ctx, kCUDA, dt, false, true, N, G4, H, a.out + tp * a.ld, Tn * a.ld, R, H, a.gates + t * G4, Tn * G4,
               true);
    cuda::launch(step_cell_forward<T>, cuda::blocks_for(N * H), cuda::kThreads, 0, stream, a, t,
                 s > 0 ? tp : int64_t(-1), s == Tn - 1);
    LOUPE_CUDA_CHECK(cudaGetLastError());
  }
}

template <class T>
void step_forward_typed(const ExecContext& ctx, const LstmParams& p, const StepLayout& lay, const Tensor& buf,
                        const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& h, const Tensor& c,
                        cudaStream_t stream) {
  const int64_t N = x.size(0), Tn = x.size(1), H = p.hidden_size, D = p.directions(), DH = D * H;
  const int L = p.num_layers;
  const T* wp = w.data<T>();
  for (int l = 0; l < L; ++l) {
    const T* in = l == 0 ? x.data<T>() : step_piece<T>(buf, lay.out(l - 1));
    T* out = l == L - 1 ? y.data<T>() : step_piece<T>(buf, lay.out(l));
    for (int d = 0; d < D; ++d) {
      const int pl = l * int(D) + d;
      const LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      CellFwd<T> a{};
      a.gates = step_piece<T>(buf, lay.gates(pl));
      a.cells = step_piece<float>(buf, lay.cells(pl));
      a.out = out + d * H;
      a.ld = DH;
      a.b_w = wp + o.b_w;
      a.b_r = wp + o.b_r;
      a.hn = h.data<T>() + pl * N * H;
      a.cn = c.data<T>() + pl * N * H;
      a.N = N, a.steps = Tn, a.H = H, a.slope = p.hard_slope;
      gemm_raw(ctx, kCUDA, x.dtype(), false, true, N * Tn, 4 * H, o.in, in, o.in, wp + o.w, o.in, a.gates, 4 * H);
      step_recurrence_forward<T>(ctx, a, wp + o.r, d, x.dtype(), stream);
    }
  }
}

// A backward call's scratch, shared by the pseudo-layers (they run one after another on the stream).
struct StepScratch {
  Tensor dg, hprev, dh, dc, part;
  int64_t chunks = 1, chunk = 1;
  StepScratch(int64_t N, int64_t T, int64_t H, DType t) {
    const int64_t rows = N * T;
    chunks = std::clamp<int64_t>((rows + 1023) / 1024, 1, 256);
    chunk = (rows + chunks - 1) / chunks;
    dg = empty(Shape{rows, 4 * H}, t, kCUDA);
    hprev = empty(Shape{rows, H}, t, kCUDA);
    dh = empty(Shape{N, H}, t, kCUDA);
    dc = empty(Shape{N, H}, DType::f32, kCUDA);
    part = empty(Shape{chunks, 4 * H}, DType::f32, kCUDA);
  }
};

// One pseudo-layer's backward, beyond the gate math's inputs in `a`: its layer input and output
// (batch-first), where its input gradient goes (null: not wanted; dir > 0 adds to it).
template <class T>
struct StepBwdLayer {
  const T* in;
  int64_t in_size;
  const T* out;  // the layer's output, at column 0
  T* d_in;
  int64_t DH;
};

// dW, dR, the biases' gradients and the input gradient from the gate gradients in sc.dg.
template <class T>
void step_weight_grads(const ExecContext& ctx, const StepBwdLayer<T>& b, const LstmLayerOffsets& o, int dir,
                       const StepScratch& sc, int64_t N, int64_t Tn, int64_t H, const T* w, T* dw,
                       cudaStream_t stream) {
  const DType dt = sc.dg.dtype();
  const int64_t G4 = 4 * H, rows = N * Tn;
  const T* dg = sc.dg.data<T>();
  cuda::launch(step_shift_hidden<T>, cuda::blocks_for(rows * H), cuda::kThreads, 0, stream, b.out + dir * H, b.DH,
               sc.hprev.data<T>(), N, Tn, H, dir);
  LOUPE_CUDA_CHECK(cudaGetLastError());
  gemm_raw(ctx, kCUDA, dt, true, false, G4, b.in_size, rows, dg, G4, b.in, b.in_size, dw + o.w, b.in_size);
  gemm_raw(ctx, kCUDA, dt, true, false, G4, H, rows, dg, G4, sc.hprev.data<T>(), H, dw + o.r, H);
  const dim3 grid(unsigned((G4 + 31) / 32), unsigned(sc.chunks)), block(32, kBiasRowsLanes);
  cuda::launch(step_bias_partial<T>, grid, block, 0, stream, dg, rows, G4, sc.chunk, sc.part.data<float>());
  LOUPE_CUDA_CHECK(cudaGetLastError());
  cuda::launch(step_bias_finish<T>, cuda::blocks_for(G4), cuda::kThreads, 0, stream, sc.part.data<float>(), sc.chunks,
               G4, dw + o.b_w, dw + o.b_r);
  LOUPE_CUDA_CHECK(cudaGetLastError());
  // Both directions read the same layer input: the second one accumulates.
  if (b.d_in)
    gemm_raw(ctx, kCUDA, dt, false, false, rows, b.in_size, G4, dg, G4, w + o.w, b.in_size, b.d_in, b.in_size, dir > 0);
}

// One direction's BPTT: per step (the direction's last first) the gate gradients, then the
// gradient reaching h of the step before through R.
template <class T>
void step_recurrence_backward(const ExecContext& ctx, CellBwd<T> a, const T* dh_final, const T* R, int dir,
                              const StepScratch& sc, cudaStream_t stream) {
  const DType dt = sc.dg.dtype();
  const int64_t N = a.N, Tn = a.steps, H = a.H, G4 = 4 * H;
  T* dh_rec = sc.dh.data<T>();
  for (int64_t s = Tn - 1; s >= 0; --s) {
    const int64_t t = dir == 0 ? s : Tn - 1 - s, tp = dir == 0 ? t - 1 : t + 1;
    a.dh = s == Tn - 1 ? dh_final : dh_rec;
    cuda::launch(step_cell_backward<T>, cuda::blocks_for(N * H), cuda::kThreads, 0, stream, a, t,
                 s > 0 ? tp : int64_t(-1), s == Tn - 1);
    LOUPE_CUDA_CHECK(cudaGetLastError());
    if (s > 0) gemm_raw(ctx, kCUDA, dt, false, false, N, H, G4, a.dg + t * G4, Tn * G4, R, H, dh_rec, H);
  }
}

// The gradient reaching a layer's outputs from above: dy's elements (any strides) or a buffer.
template <class T>
struct StepGradIn {
  const T* p = nullptr;  // null: zero
  int64_t n = 0, t = 0, k = 0;
};

template <class T>
void step_backward_typed(const ExecContext& ctx, const LstmParams& p, const StepLayout& lay, const Tensor& saved,
                         const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy, const Tensor& dh,
                         const Tensor& dc, const Tensor& dx, const Tensor& dw, cudaStream_t stream) {
  const int64_t N = x.size(0), Tn = x.size(1), H = p.hidden_size, D = p.directions(), DH = D * H;
  const int L = p.num_layers;
  const StepScratch sc(N, Tn, H, x.dtype());
  StepGradIn<T> g;
  if (dy.defined()) g = StepGradIn<T>{dy.data<T>(), dy.strides()[0], dy.strides()[1], dy.strides()[2]};
  Tensor grad_above, grad_below;  // the gradients of the layers' outputs between layers
  for (int l = L - 1; l >= 0; --l) {
    grad_below = l > 0 ? empty(Shape{N, Tn, DH}, x.dtype(), kCUDA) : Tensor();
    StepBwdLayer<T> b{};
    b.in = l == 0 ? x.data<T>() : step_piece<T>(saved, lay.out(l - 1));
    b.in_size = l == 0 ? p.input_size : DH;
    b.out = l == L - 1 ? y.data<T>() : step_piece<T>(saved, lay.out(l));
    b.d_in = l > 0 ? grad_below.data<T>() : dx.defined() ? dx.data<T>() : nullptr;
    b.DH = DH;
    for (int d = 0; d < D; ++d) {
      const int pl = l * int(D) + d;
      const LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      CellBwd<T> a{};
      a.gates = step_piece<T>(saved, lay.gates(pl));
      a.cells = step_piece<float>(saved, lay.cells(pl));
      a.dy = g.p ? g.p + d * H * g.k : nullptr;
      a.dy_n = g.n, a.dy_t = g.t, a.dy_k = g.k;
      a.dc_final = dc.defined() ? dc.data<T>() + pl * N * H : nullptr;
      a.dc = sc.dc.data<float>();
      a.dg = sc.dg.data<T>();
      a.N = N, a.steps = Tn, a.H = H, a.slope = p.hard_slope;
      const T* dh_final = dh.defined() ? dh.data<T>() + pl * N * H : nullptr;
      step_recurrence_backward<T>(ctx, a, dh_final, w.data<T>() + o.r, d, sc, stream);
      step_weight_grads<T>(ctx, b, o, d, sc, N, Tn, H, w.data<T>(), dw.data<T>(), stream);
    }
    if (l > 0) {
      grad_above = grad_below;
      g = StepGradIn<T>{grad_above.data<T>(), Tn * DH, DH, 1};
    }
  }
}

}  // namespace

bool step_supports(const LstmParams& p, DType dtype, std::string* why) {
  auto no = [&](const char* w) {
    if (why) *why = w;
    return false;
  };
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    return no("loupe's stepwise LSTM kernels take float32, float16 and bfloat16");
  if (p.dropout > 0 && p.num_layers > 1) return no("loupe's stepwise LSTM kernels have no dropout between layers");
  if (p.hidden_size < 1 || p.input_size < 1 || p.num_layers < 1)
    return no("loupe's stepwise LSTM kernels need a hidden size, an input size and a layer");
  return true;
}

Tensor step_forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y,
                    const Tensor& h, const Tensor& c, bool training, cudaStream_t stream) {
  std::string why;
  LOUPE_CHECK(step_supports(p, x.dtype(), &why), "lstm: ", why);
  LOUPE_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous() && h.is_contiguous() && c.is_contiguous(),
              "lstm: the stepwise kernels take contiguous x, weights, y, h and c");
  const StepLayout lay(p, x.size(0), x.size(1), x.dtype(), training);
  Tensor buf = empty(Shape{int64_t(lay.total)}, DType::u8, kCUDA);
  if (x.size(0) > 0 && x.size(1) > 0)
    cuda::dispatch_float(x.dtype(), "lstm", [&](auto tag) {
      step_forward_typed<decltype(tag)>(ctx, p, lay, buf, x, w, y, h, c, stream);
    });
  return training ? buf : Tensor();
}

void step_backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                   const Tensor& saved, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
                   const Tensor& dw, cudaStream_t stream) {
  std::string why;
  LOUPE_CHECK(step_supports(p, x.dtype(), &why), "lstm backward: ", why);
  const StepLayout lay(p, x.size(0), x.size(1), x.dtype(), true);
  LOUPE_CHECK(saved.defined() && size_t(saved.nbytes()) >= lay.total,
              "lstm backward: not the stepwise kernels' training-mode forward state");
  LOUPE_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous() && dw.is_contiguous() &&
                  (!dh.defined() || dh.is_contiguous()) && (!dc.defined() || dc.is_contiguous()) &&
                  (!dx.defined() || dx.is_contiguous()),
              "lstm backward: the stepwise kernels take contiguous x, weights, y, dh, dc, dx and dw");
  if (x.size(0) > 0 && x.size(1) > 0)
    cuda::dispatch_float(x.dtype(), "lstm backward", [&](auto tag) {
      step_backward_typed<decltype(tag)>(ctx, p, lay, saved, x, w, y, dy, dh, dc, dx, dw, stream);
    });
}

}  // namespace loupe::lstm_step
