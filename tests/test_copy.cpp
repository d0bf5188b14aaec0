// Strided copies (copy_, contiguous()). CopyPlan.*: which GPU kernel each layout gets, with how
// many dimensions and how wide its loads (host code, runs everywhere).
#include <gtest/gtest.h>

#include <vector>

#include "loupe.h"
#include "ops/copy_plan.h"

using namespace loupe;
using Path = CopyPlan::Path;

namespace {

// The plan for dst = contiguous copy of x (or copy_(dst, x) with a given dst).
CopyPlan plan_for(const Tensor& dst, const Tensor& x) {
  return plan_copy(x.shape(), dst.strides(), x.strides(), int(x.element_size()),
                   reinterpret_cast<uintptr_t>(dst.data_ptr()), reinterpret_cast<uintptr_t>(x.data_ptr()));
}
CopyPlan plan_contiguous(const Tensor& x) { return plan_for(empty(x.shape(), x.dtype()), x); }

// x with its dimensions reordered: result dimension i is x's dimension order[i].
Tensor permuted(const Tensor& x, const std::vector<int>& order) {
  Shape s, st;
  for (int d : order) {
    s.push_back(x.shape()[d]);
    st.push_back(x.strides()[d]);
  }
  return as_strided(x, s, st, x.impl()->offset);
}

std::vector<int64_t> sizes(const CopyPlan& p) { return std::vector<int64_t>(p.size, p.size + p.nd); }

}  // namespace

TEST(CopyPlan, BatchSequenceSwapIsRowsOf16Bytes) {
  // imdb_bilstm around cuDNN: [N, T, F] <-> [T, N, F] in half, rows of 128 * 2 bytes.
  Tensor x = empty(Shape{1024, 100, 128}, DType::f16);
  CopyPlan p = plan_contiguous(x.transpose(0, 1));
  EXPECT_EQ(p.path, Path::Rows);
  EXPECT_EQ(sizes(p), (std::vector<int64_t>{100, 1024, 128}));
  EXPECT_EQ(p.unit, 16);
  EXPECT_TRUE(p.index32);
}

TEST(CopyPlan, RowUnitFollowsRowBytesAndAlignment) {
  // 57 halves = 114 bytes a row: 2-byte units.
  CopyPlan odd = plan_contiguous(empty(Shape{1000, 40, 57}, DType::f16).transpose(0, 1));
  EXPECT_EQ(odd.path, Path::Rows);
  EXPECT_EQ(odd.unit, 2);
  // 12 floats = 48 bytes: 16-byte units; 6 floats = 24 bytes: 8-byte units.
  EXPECT_EQ(plan_contiguous(empty(Shape{8, 5, 12}).transpose(0, 1)).unit, 16);
  EXPECT_EQ(plan_contiguous(empty(Shape{8, 5, 6}).transpose(0, 1)).unit, 8);
  // A view one element in: misaligned for any vector.
  Tensor base = empty(Shape{1 + 8 * 5 * 128}, DType::f16);
  Tensor x = as_strided(base, Shape{8, 5, 128}, Shape{640, 128, 1}, 1);
  EXPECT_EQ(plan_contiguous(x.transpose(0, 1)).unit, 2);
  // A slice with gaps: rows of 128 floats, 200 apart; 16-byte aligned at column 4, not at 3.
  Tensor m = empty(Shape{64, 200});
  CopyPlan a = plan_contiguous(m.slice(1, 4, 132)), b = plan_contiguous(m.slice(1, 3, 131));
  EXPECT_EQ(a.path, Path::Rows);
  EXPECT_EQ(sizes(a), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(a.unit, 16);
  EXPECT_EQ(b.unit, 4);
  // Elements of 8 bytes: 16-byte units hold two.
  EXPECT_EQ(plan_contiguous(empty(Shape{4, 3, 2}, DType::f64).transpose(0, 1)).unit, 16);
  EXPECT_EQ(plan_contiguous(empty(Shape{4, 3, 3}, DType::f64).transpose(0, 1)).unit, 8);
}

TEST(CopyPlan, ChannelsLastConversionsAreBatchedTransposes) {
  Tensor x = empty(Shape{37, 19, 13, 11});
  // NCHW -> NHWC: [N, HW, C], dst contiguous along C, src along HW.
  Tensor cl = empty(x.shape(), x.dtype(), kCPU, MemoryFormat::ChannelsLast);
  CopyPlan to_cl = plan_for(cl, x);
  EXPECT_EQ(to_cl.path, Path::Transpose);
  EXPECT_EQ(sizes(to_cl), (std::vector<int64_t>{37, 143, 19}));
  EXPECT_EQ(to_cl.src_inner, 1);
  // NHWC -> NCHW: [N, C, HW], dst contiguous along HW, src along C.
  CopyPlan from_cl = plan_contiguous(cl);
  EXPECT_EQ(from_cl.path, Path::Transpose);
  EXPECT_EQ(sizes(from_cl), (std::vector<int64_t>{37, 19, 143}));
  EXPECT_EQ(from_cl.src_inner, 1);
  // Three channels (an RGB image), or a 3x3 filter: tiles would run mostly empty.
  Tensor rgb = empty(Shape{37, 3, 13, 11});
  EXPECT_EQ(plan_for(empty(rgb.shape(), rgb.dtype(), kCPU, MemoryFormat::ChannelsLast), rgb).path, Path::General);
  Tensor filter = empty(Shape{64, 32, 3, 3});
  EXPECT_EQ(plan_for(empty(filter.shape(), filter.dtype(), kCPU, MemoryFormat::ChannelsLast), filter).path,
            Path::General);
  // A plain 2-D transpose.
  CopyPlan t = plan_contiguous(empty(Shape{300, 77}).t());
  EXPECT_EQ(t.path, Path::Transpose);
  EXPECT_EQ(t.src_inner, 0);
}

TEST(CopyPlan, SizeOneDimensionsDropAndNeighboursMerge) {
  Tensor x = empty(Shape{37, 1, 64, 1});
  CopyPlan p = plan_contiguous(as_strided(x, Shape{1, 37, 1, 64}, Shape{7, 64, 1000, 1}, 0));
  EXPECT_EQ(p.path, Path::Rows);
  EXPECT_EQ(sizes(p), (std::vector<int64_t>{37 * 64}));
  CopyPlan one = plan_contiguous(as_strided(x, Shape{1, 1}, Shape{5, 9}, 0));
  EXPECT_EQ(one.nd, 1);
  EXPECT_EQ(one.size[0], 1);
}

TEST(CopyPlan, PermutationsPickTheirKernel) {
  Tensor x = empty(Shape{2, 3, 16, 5, 20});
  // The contiguous dimension stays innermost: rows; [2, 3] and [16, 5] stay together and merge.
  CopyPlan rows = plan_contiguous(permuted(x, {2, 3, 0, 1, 4}));
  EXPECT_EQ(rows.path, Path::Rows);
  EXPECT_EQ(sizes(rows), (std::vector<int64_t>{80, 6, 20}));
  // Nothing merges: rows under four outer dimensions.
  CopyPlan rows5 = plan_contiguous(permuted(x, {3, 1, 0, 2, 4}));
  EXPECT_EQ(rows5.path, Path::Rows);
  EXPECT_EQ(rows5.nd, 5);
  // It moves outward: a transpose with a batch of three dimensions.
  CopyPlan tr = plan_contiguous(permuted(x, {4, 1, 0, 3, 2}));
  EXPECT_EQ(tr.path, Path::Transpose);
  EXPECT_EQ(tr.nd, 5);
  EXPECT_EQ(tr.src_inner, 0);
  // Every other element (no stride 1 in src), permuted: the general kernel.
  Tensor pairs = empty(Shape{2, 3, 4, 5, 6, 2});
  Tensor evens = as_strided(pairs, Shape{2, 3, 4, 5, 6}, Shape{720, 240, 60, 12, 2}, 0);
  CopyPlan g = plan_contiguous(permuted(evens, {4, 2, 0, 3, 1}));
  EXPECT_EQ(g.path, Path::General);
  EXPECT_EQ(g.nd, 5);
  EXPECT_TRUE(g.index32);
}

TEST(CopyPlan, HugeOffsetsNeed64BitIndices) {
  // The plan only reads shapes, strides and addresses: no storage of 2^31 elements is needed.
  Shape shape{3, 40, 50};
  Shape dst = contiguous_strides(shape);
  EXPECT_TRUE(plan_copy(shape, dst, Shape{int64_t(1) << 29, 50, 1}, 1, 0, 0).index32);
  EXPECT_FALSE(plan_copy(shape, dst, Shape{int64_t(1) << 30, 50, 1}, 1, 0, 0).index32);
  EXPECT_FALSE(plan_copy(Shape{int64_t(1) << 31}, Shape{1}, Shape{1}, 1, 0, 0).index32);
}
