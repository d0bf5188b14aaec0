#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "core/copy.h"
#include "core/copy_plan.h"
#include "core/cuda_util.cuh"
#include "core/dispatch.h"

namespace loupe {
namespace {

// ---- strided copies --------------------------------------------------------------------------
// plan_copy (core/copy_plan.cpp) reduces the copy to a few dimensions in dst's memory order and
// picks one of three kernels. A copy moves bits, so each kernel is instantiated per element size
// (uint8_t ... uint64_t, uint4 for 16-byte vectors), never per dtype. I is the index type:
// uint32_t where the plan allows, since a 32-bit division costs a fraction of a 64-bit one, else
// int64_t (tensors of 2^31 elements or more).

// Up to kMaxDims dimensions with a stride on each side: a linear index to the two offsets.
template <class I>
struct Dims {
  int nd = 0;
  I size[kMaxDims] = {}, a[kMaxDims] = {}, b[kMaxDims] = {};
  __device__ __forceinline__ void offsets(I i, I& oa, I& ob) const {
    oa = ob = 0;
    for (int d = nd - 1; d >= 0; --d) {
      I q = i / size[d];
      I idx = i - q * size[d];
      i = q;
      oa += idx * a[d];
      ob += idx * b[d];
    }
  }
};

// The plan's dimensions except skip0 and skip1, strides divided by `per` (elements per unit).
template <class I>
Dims<I> dims_except(const CopyPlan& p, int skip0, int skip1 = -1, int64_t per = 1) {
  Dims<I> d;
  for (int k = 0; k < p.nd; ++k) {
    if (k == skip0 || k == skip1) continue;
    d.size[d.nd] = I(p.size[k]);
    d.a[d.nd] = I(p.dst[k] / per);
    d.b[d.nd] = I(p.src[k] / per);
    ++d.nd;
  }
  return d;
}

// Rows: the innermost dimension is contiguous on both sides. threadIdx.y (and blockIdx.y) picks a
// row, whose two offsets are computed once; threadIdx.x (and blockIdx.x) walks along it in units
// of U (16-byte vectors where the plan found them aligned), K units per thread, all loaded before
// any is stored: a copy is bound by the bytes in flight, and one 2-byte load per thread leaves
// the memory system idle (measured on an H100: [1024, 40, 57] half, 14.6 us with K = 1, 7.4 with 4).
template <class U, int K, class I>
__global__ void copy_rows_kernel(U* __restrict__ dst, const U* __restrict__ src, I rows, I len,
                                 const __grid_constant__ Dims<I> outer) {
  const I step = I(gridDim.x) * blockDim.x * K;
  for (I r = I(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += I(gridDim.y) * blockDim.y) {
    I od, os;
    outer.offsets(r, od, os);
    for (I c0 = I(blockIdx.x) * blockDim.x * K + threadIdx.x; c0 < len; c0 += step) {
      U v[K];
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (c0 + I(k) * blockDim.x < len) v[k] = src[os + c0 + I(k) * blockDim.x];
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (c0 + I(k) * blockDim.x < len) dst[od + c0 + I(k) * blockDim.x] = v[k];
    }
  }
}

// Transpose: dst is contiguous along dimension c (the innermost), src along another, j; e.g.
// NCHW <-> NHWC, a batch of [C, HW] <-> [HW, C]. A 32x32 tile is read along j and written along c,
// both coalesced, through shared memory; the other dimensions are a batch in blockIdx.y (and
// blockIdx.x numbers the tiles). The plan sends it only sizes of 16 and more along j and c.
constexpr int kTile = 32, kTileRows = 8;  // 32x8 threads, 4 elements each per tile

template <class I>
struct TransposeArgs {
  I nj, nc;        // sizes along j and c
  I dst_j, src_c;  // dst's stride along j, src's along c (the other two are 1)
  I tiles_c;       // tiles along c
  I batch;         // elements of the remaining dimensions
  Dims<I> rest;    // the remaining dimensions
};

template <class E, class I>
__global__ void copy_transpose_kernel(E* __restrict__ dst, const E* __restrict__ src,
                                      const __grid_constant__ TransposeArgs<I> a) {
  __shared__ E tile[kTile][kTile + 1];  // + 1: a column of the tile lies in 32 different banks
  I tj = blockIdx.x / a.tiles_c, tc = blockIdx.x - tj * a.tiles_c;
  I j0 = tj * kTile, c0 = tc * kTile;
  for (I b = blockIdx.y; b < a.batch; b += gridDim.y) {
    I od, os;
    a.rest.offsets(b, od, os);
    // Loops of a fixed count, so that all four loads are issued before the first one returns
    // (counted from threadIdx.y they ran one at a time: 1.5x slower).
    I j = j0 + threadIdx.x;
#pragma unroll
    for (int k0 = 0; k0 < kTile; k0 += kTileRows) {
      int k = k0 + threadIdx.y;
      I c = c0 + k;
      if (j < a.nj && c < a.nc) tile[k][threadIdx.x] = src[os + j + c * a.src_c];
    }
    __syncthreads();
    I c = c0 + threadIdx.x;
#pragma unroll
    for (int k0 = 0; k0 < kTile; k0 += kTileRows) {
      int k = k0 + threadIdx.y;
      I jk = j0 + k;
      if (jk < a.nj && c < a.nc) dst[od + jk * a.dst_j + c] = tile[threadIdx.x][k];
    }
    __syncthreads();  // the tile is free for the next batch element
  }
}

// General: any strides, offsets by division over the plan's dimensions; K elements per thread,
// loaded before any is stored (as in the rows kernel). On an H100 K = 4 converts 3 channels to
// channels-last 10% faster than K = 1 and a gather of scattered reads 13% slower; models make
// the former.
template <class E, int K, class I>
__global__ void copy_general_kernel(E* __restrict__ dst, const E* __restrict__ src, I n,
                                    const __grid_constant__ Dims<I> dims) {
  for (I i0 = I(blockIdx.x) * blockDim.x * K + threadIdx.x; i0 < n; i0 += I(gridDim.x) * blockDim.x * K) {
    E v[K];
    I od[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      I i = i0 + I(k) * blockDim.x, os;
      if (i < n) {
        dims.offsets(i, od[k], os);
        v[k] = src[os];
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (i0 + I(k) * blockDim.x < n) dst[od[k]] = v[k];
  }
}

// Calls f with a value of the unsigned type of `bytes` bytes: 1, 2, 4 or 8, and 16 (uint4) where
// kVectors (the rows kernel's units; elements are never 16 bytes).
template <bool kVectors = false, class F>
void with_bits(int bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default:
      if constexpr (kVectors) f(uint4{});
      break;
  }
}

template <class I>
void launch_copy(const CopyPlan& p, void* dst, const void* src, int es, int64_t n, cudaStream_t stream) {
  int inner = p.nd - 1;
  if (p.path == CopyPlan::Path::Rows) {
    int64_t per = p.unit / es;  // elements per unit
    I len = I(p.size[inner] / per), rows = I(n / p.size[inner]);
    Dims<I> outer = dims_except<I>(p, inner, -1, per);
    with_bits<true>(p.unit, [&](auto u) {
      using U = decltype(u);
      constexpr int K = sizeof(U) >= 16 ? 1 : sizeof(U) == 8 ? 2 : 4;  // 16 to 64 bytes in flight
      int tx = 1;  // threads along a row: enough for K units each, at most the block
      while (int64_t(tx) * K < int64_t(len) && tx < cuda::kThreads) tx *= 2;
      int ty = cuda::kThreads / tx;
      dim3 grid(unsigned(std::min<int64_t>((int64_t(len) + tx * K - 1) / (tx * K), 1 << 20)),
                unsigned(std::min<int64_t>((int64_t(rows) + ty - 1) / ty, 65535)));
      cuda::launch(copy_rows_kernel<U, K, I>, grid, dim3(tx, ty), 0, stream, static_cast<U*>(dst),
                   static_cast<const U*>(src), rows, len, outer);
    });
  } else if (p.path == CopyPlan::Path::Transpose) {
    int j = p.src_inner;
    TransposeArgs<I> a;
    a.nj = I(p.size[j]);
    a.nc = I(p.size[inner]);
    a.dst_j = I(p.dst[j]);
    a.src_c = I(p.src[inner]);
    int64_t tiles_j = (p.size[j] + kTile - 1) / kTile, tiles_c = (p.size[inner] + kTile - 1) / kTile;
    LOUPE_CHECK(tiles_j * tiles_c < (int64_t(1) << 31), "copy: transpose of ", p.size[j], " x ", p.size[inner],
                " elements has too many tiles for one launch");
    a.tiles_c = I(tiles_c);
    a.batch = I(n / (p.size[j] * p.size[inner]));
    a.rest = dims_except<I>(p, j, inner);
    dim3 grid(unsigned(tiles_j * tiles_c), unsigned(std::min<int64_t>(int64_t(a.batch), 65535)));
    with_bits(es, [&](auto e) {
      using E = decltype(e);
      cuda::launch(copy_transpose_kernel<E, I>, grid, dim3(kTile, kTileRows), 0, stream, static_cast<E*>(dst),
                   static_cast<const E*>(src), a);
    });
  } else {
    constexpr int K = 4;
    Dims<I> dims = dims_except<I>(p, -1);
    with_bits(es, [&](auto e) {
      using E = decltype(e);
      cuda::launch(copy_general_kernel<E, K, I>, cuda::blocks_for((n + K - 1) / K), cuda::kThreads, 0, stream,
                   static_cast<E*>(dst), static_cast<const E*>(src), I(n), dims);
    });
  }
}

void copy_strided(const ExecContext& ctx, const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const cudaStream_t s = cuda::stream(ctx);
  int es = int(dst.element_size());
  CopyPlan p = plan_copy(dst.shape(), dst.strides(), src.strides(), es, reinterpret_cast<uintptr_t>(dst.data_ptr()),
                         reinterpret_cast<uintptr_t>(src.data_ptr()));
  if (p.index32) launch_copy<uint32_t>(p, dst.data_ptr(), src.data_ptr(), es, dst.numel(), s);
  else launch_copy<int64_t>(p, dst.data_ptr(), src.data_ptr(), es, dst.numel(), s);
  LOUPE_CUDA_LAUNCH_CHECK();
}

// Element load/store through float (or double for float64).
template <class T> __device__ double ld(const T* p, int64_t i) { return double(p[i]); }
template <> __device__ double ld(const __half* p, int64_t i) { return double(__half2float(p[i])); }
template <> __device__ double ld(const __nv_bfloat16* p, int64_t i) { return double(__bfloat162float(p[i])); }
template <class T> __device__ void st(T* p, int64_t i, double v) { p[i] = T(v); }
template <> __device__ void st(__half* p, int64_t i, double v) { p[i] = __float2half_rn(float(v)); }
template <> __device__ void st(__nv_bfloat16* p, int64_t i, double v) { p[i] = __float2bfloat16_rn(float(v)); }
template <> __device__ void st(float* p, int64_t i, double v) { p[i] = float(v); }

template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) st(dst, i, ld(src, i));
}

template <class D>
__global__ void fill_kernel(D* dst, double v, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) st(dst, i, v);
}

template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    case DType::i32: f(int32_t{}); break;
    case DType::u8: f(uint8_t{}); break;
  }
}

void cast(const ExecContext& ctx, const Tensor& dst, const Tensor& src) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = dst.numel();
  with_type(dst.dtype(), [&](auto d) {
    with_type(src.dtype(), [&](auto sv) {
      using D = decltype(d);
      using S = decltype(sv);
      cuda::launch(cast_kernel<D, S>, cuda::blocks_for(n), cuda::kThreads, 0, s, static_cast<D*>(dst.data_ptr()),
                   static_cast<const S*>(src.data_ptr()), n);
    });
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void fill(const ExecContext& ctx, const Tensor& dst, double v) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = dst.numel();
  with_type(dst.dtype(), [&](auto d) {
    using D = decltype(d);
    cuda::launch(fill_kernel<D>, cuda::blocks_for(n), cuda::kThreads, 0, s, static_cast<D*>(dst.data_ptr()), v, n);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

// dst's type sets the compute type: float32 for float32 and the 16-bit types (as ops' add),
// float64 for float64. b may be narrower than dst: a float16 gradient added into a float32 one.
template <class T> struct Compute { using type = float; };
template <> struct Compute<double> { using type = double; };
template <class U> __device__ U widen(U x) { return x; }
__device__ float widen(__half x) { return __half2float(x); }
__device__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T, class U>
__global__ void add_kernel(T* __restrict__ dst, const T* a, const U* b, int64_t n) {
  using C = typename Compute<T>::type;
  LOUPE_KERNEL_LOOP(i, n) dst[i] = T(C(widen(a[i])) + C(widen(b[i])));
}

template <class F>
void with_floating(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: LOUPE_FAIL("add on CUDA needs floating dtypes, not ", dtype_name(t));
  }
}

void add_into(const ExecContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = dst.numel();
  with_floating(dst.dtype(), [&](auto tv) {
    with_floating(b.dtype(), [&](auto uv) {
      using T = decltype(tv);
      using U = decltype(uv);
      cuda::launch(add_kernel<T, U>, cuda::blocks_for(n), cuda::kThreads, 0, s, static_cast<T*>(dst.data_ptr()),
                   static_cast<const T*>(a.data_ptr()), static_cast<const U*>(b.data_ptr()), n);
    });
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

// Up to kManyPairs float32 accumulations in one launch, passed by value: each block finds its pair
// from the pairs' first blocks (a few dozen leaves: a linear search), then adds its chunk.
constexpr int kManyPairs = 48, kManyChunk = cuda::kThreads * 4;
struct ManyPairs {
  int n = 0;
  float* dst[kManyPairs];
  const void* src[kManyPairs];
  int64_t numel[kManyPairs];
  int64_t first_block[kManyPairs + 1] = {};
  int8_t src_type[kManyPairs];  // 0 float32, 1 float16, 2 bfloat16
  // A 4-D src in channels-last order ([K, R, S, C] in memory: a convolution's filter gradient) into
  // a contiguous dst: its C and R*S; 0 where src has dst's strides.
  int32_t cl_c[kManyPairs], cl_rs[kManyPairs];
  bool write = false;  // dst = src (CopyKernels::add_many)
};

__global__ void add_many_kernel(ManyPairs p) {
  int k = 0;
  while (k + 1 < p.n && int64_t(blockIdx.x) >= p.first_block[k + 1]) ++k;
  const int64_t base = (int64_t(blockIdx.x) - p.first_block[k]) * kManyChunk, n = p.numel[k];
  float* dst = p.dst[k];
  const int64_t C = p.cl_c[k], RS = p.cl_rs[k];
  for (int64_t i = base + threadIdx.x; i < n && i < base + kManyChunk; i += blockDim.x) {
    int64_t j = i;
    if (C > 0) {  // dst's (k, c, rs) is src's k * RS * C + rs * C + c
      const int64_t rs = i % RS, kc = i / RS;
      j = (kc / C) * RS * C + rs * C + kc % C;
    }
    float b = p.src_type[k] == 0   ? static_cast<const float*>(p.src[k])[j]
              : p.src_type[k] == 1 ? widen(static_cast<const __half*>(p.src[k])[j])
                                   : widen(static_cast<const __nv_bfloat16*>(p.src[k])[j]);
    dst[i] = p.write ? b : dst[i] + b;  // as cast_kernel / add_kernel<float, U>: the same rounding
  }
}

void launch_many(ManyPairs& p, cudaStream_t s) {
  if (p.n == 0) return;
  const int64_t blocks = p.first_block[p.n];
  if (blocks > 0) cuda::launch(add_many_kernel, unsigned(blocks), cuda::kThreads, 0, s, p);
  LOUPE_CUDA_LAUNCH_CHECK();
  const bool write = p.write;
  p = ManyPairs{};
  p.write = write;
}

void add_many(const ExecContext& ctx, const std::vector<std::pair<Tensor, Tensor>>& pairs, bool write) {
  const cudaStream_t s = cuda::stream(ctx);
  ManyPairs p;
  p.write = write;
  for (const auto& [dst, src] : pairs) {
    const DType t = src.dtype();
    if (dst.dtype() != DType::f32 || (t != DType::f32 && t != DType::f16 && t != DType::bf16)) {
      // float64 (CPU checks), or another pairing: one launch of its own
      write ? cast(ctx, dst, src) : add_into(ctx, dst, dst, src);
      continue;
    }
    if (p.n == kManyPairs) launch_many(p, s);
    p.dst[p.n] = static_cast<float*>(dst.data_ptr());
    p.src[p.n] = src.data_ptr();
    p.numel[p.n] = dst.numel();
    p.src_type[p.n] = int8_t(t == DType::f32 ? 0 : t == DType::f16 ? 1 : 2);
    const bool cl = src.strides() != dst.strides();  // channels-last into contiguous (the header's)
    p.cl_c[p.n] = cl ? int32_t(src.size(1)) : 0;
    p.cl_rs[p.n] = cl ? int32_t(src.size(2) * src.size(3)) : 0;
    p.first_block[p.n + 1] = p.first_block[p.n] + (dst.numel() + kManyChunk - 1) / kManyChunk;
    ++p.n;
  }
  launch_many(p, s);
}

const CopyKernels table{copy_strided, cast, fill, add_into, add_many};
const RegisterBackend<CopyKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
