// Tensor-core and asynchronous-copy primitives written out in PTX (mma.sync m16n8k16, ldmatrix,
// cp.async) rather than through WMMA: the accumulator's layout is then known, so a lane finds its
// outputs in its own registers and applies an epilogue there, with no round trip through shared
// memory (WMMA's m8n32k16, not a native shape, also cost extra moves per product). Used by the
// persistent LSTM (ops/lstm/lstm_persist_cuda.cu) and the fused MLP (ops/fused/mlp_cuda.cu).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace loupe::cuda {

// d += a b: a 16x16 row-major (4 registers of two elements), b 16x8 column-major (2 registers).
// The accumulator gives lane l rows l / 4 (d[0], d[1]) and l / 4 + 8 (d[2], d[3]) at columns
// 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four (X4) or two 8x8 tiles of 16-bit values from shared memory; lane l gives the address of row
// l % 8 of tile l / 8. The memory clobber keeps it after the stores that a __syncthreads published.
template <int X>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (X == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s) : "memory");
}
// As ldmatrix<4>, each 8x8 tile transposed: from a k-major (row-major [k][n]) tile, the fragments
// of its column-major reading.
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
template <class T>
__device__ __forceinline__ uint32_t pack2(T lo, T hi) {
  uint16_t a, b;
  memcpy(&a, &lo, 2);
  memcpy(&b, &hi, 2);
  return uint32_t(a) | uint32_t(b) << 16;
}

// 16 bytes from global to shared memory, asynchronously; zeros instead where !valid (src is then
// not read). Groups of them complete in order: commit after issuing a stage, wait until at most N
// groups are pending.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace loupe::cuda
