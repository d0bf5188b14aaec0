#include "core/copy_plan.h"

#include <utility>

namespace loupe {
namespace {

// Whether the copy can run on 32-bit indices: non-negative strides, and the element count and
// the last offset on either side below 2^31.
bool fits_index32(const CopyPlan& p) {
  const int64_t lim = int64_t(1) << 31;
  int64_t n = 1, last_d = 0, last_s = 0;
  for (int d = 0; d < p.nd; ++d) {
    if (p.dst[d] < 0 || p.src[d] < 0) return false;
    n *= p.size[d];
    last_d += (p.size[d] - 1) * p.dst[d];
    last_s += (p.size[d] - 1) * p.src[d];
    if (n >= lim || last_d >= lim || last_s >= lim) return false;
  }
  return true;
}

// The widest load (16, 8, 4 or 2 bytes, else the element) that starts every row on both sides
// on its own alignment and divides the row: then a row is a run of such units.
int row_unit(const CopyPlan& p, int es, uintptr_t dst_addr, uintptr_t src_addr) {
  int inner = p.nd - 1;
  for (int u = 16; u > es; u /= 2) {
    bool ok = (p.size[inner] * es) % u == 0 && dst_addr % u == 0 && src_addr % u == 0;
    for (int d = 0; ok && d < inner; ++d) ok = (p.dst[d] * es) % u == 0 && (p.src[d] * es) % u == 0;
    if (ok) return u;
  }
  return es;
}

}  // namespace

CopyPlan plan_copy(const Shape& shape, const Shape& dst_strides, const Shape& src_strides, int elem_size,
                   uintptr_t dst_addr, uintptr_t src_addr) {
  CopyPlan p;
  // Size-1 dimensions move nothing: drop them.
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    p.size[p.nd] = shape[d];
    p.dst[p.nd] = dst_strides[d];
    p.src[p.nd] = src_strides[d];
    ++p.nd;
  }
  if (p.nd == 0) {  // a single element
    p.nd = 1;
    p.size[0] = p.dst[0] = p.src[0] = 1;
  }
  // A copy may visit elements in any order: visit them in dst's memory order (strides
  // descending, a stable insertion sort over at most 8), so that neighbouring threads write
  // neighbouring addresses. Ties (only where dst overlaps itself) go by src's strides.
  for (int i = 1; i < p.nd; ++i) {
    for (int j = i; j > 0; --j) {
      bool before = p.dst[j] > p.dst[j - 1] || (p.dst[j] == p.dst[j - 1] && p.src[j] > p.src[j - 1]);
      if (!before) break;
      std::swap(p.size[j], p.size[j - 1]);
      std::swap(p.dst[j], p.dst[j - 1]);
      std::swap(p.src[j], p.src[j - 1]);
    }
  }
  // Merge each dimension into the one inside it where both tensors step over that one whole:
  // [N, T, F] -> [T, N, F] stays 3-D, NCHW -> NHWC becomes [N, HW, C].
  int nd = 1;
  for (int d = 1; d < p.nd; ++d) {
    int o = nd - 1;  // the merged dimension just outside d
    if (p.dst[o] == p.dst[d] * p.size[d] && p.src[o] == p.src[d] * p.size[d]) {
      p.size[o] *= p.size[d];
      p.dst[o] = p.dst[d];
      p.src[o] = p.src[d];
    } else {
      p.size[nd] = p.size[d];
      p.dst[nd] = p.dst[d];
      p.src[nd] = p.src[d];
      ++nd;
    }
  }
  p.nd = nd;
  p.index32 = fits_index32(p);

  int inner = p.nd - 1;
  if (p.dst[inner] == 1 && p.src[inner] == 1) {
    p.path = CopyPlan::Path::Rows;
    p.unit = row_unit(p, elem_size, dst_addr, src_addr);
    return p;
  }
  p.unit = elem_size;
  // A 32x32 tile needs both sides at least half full: converting 3 channels to channels-last, 29
  // of 32 lanes would idle, and the general kernel is 3.5x faster (measured on an H100; at 16
  // channels the tiles are still 15% ahead).
  const int64_t min_side = 16;
  if (p.dst[inner] == 1 && p.size[inner] >= min_side) {
    for (int d = inner - 1; d >= 0; --d) {
      if (p.src[d] == 1) {
        if (p.size[d] < min_side) break;
        p.path = CopyPlan::Path::Transpose;
        p.src_inner = d;
        return p;
      }
    }
  }
  p.path = CopyPlan::Path::General;
  return p;
}

const char* copy_path_name(CopyPlan::Path p) {
  switch (p) {
    case CopyPlan::Path::Rows: return "rows";
    case CopyPlan::Path::Transpose: return "transpose";
    case CopyPlan::Path::General: return "general";
  }
  return "?";
}

}  // namespace loupe
