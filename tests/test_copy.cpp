// Strided copies (copy_, contiguous()). CopyPlan.*: which GPU kernel each layout gets, with how
// many dimensions and how wide its loads (host code, runs everywhere). CudaCopy.*: every kernel
// bit for bit against the CPU at the reference models' sizes and at odd ones (skips without a GPU;
// CTest runs it as test_copy_gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/copy.h"
#include "core/copy_plan.h"
#include "core/dispatch.h"
#include "loupe.h"
#include "skip.h"

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
  CopyPlan p = plan_contiguous(transpose(x, 0, 1));
  EXPECT_EQ(p.path, Path::Rows);
  EXPECT_EQ(sizes(p), (std::vector<int64_t>{100, 1024, 128}));
  EXPECT_EQ(p.unit, 16);
  EXPECT_TRUE(p.index32);
}

TEST(CopyPlan, RowUnitFollowsRowBytesAndAlignment) {
  // 57 halves = 114 bytes a row: 2-byte units.
  CopyPlan odd = plan_contiguous(transpose(empty(Shape{1000, 40, 57}, DType::f16), 0, 1));
  EXPECT_EQ(odd.path, Path::Rows);
  EXPECT_EQ(odd.unit, 2);
  // 12 floats = 48 bytes: 16-byte units; 6 floats = 24 bytes: 8-byte units.
  EXPECT_EQ(plan_contiguous(transpose(empty(Shape{8, 5, 12}), 0, 1)).unit, 16);
  EXPECT_EQ(plan_contiguous(transpose(empty(Shape{8, 5, 6}), 0, 1)).unit, 8);
  // A view one element in: misaligned for any vector.
  Tensor base = empty(Shape{1 + 8 * 5 * 128}, DType::f16);
  Tensor x = as_strided(base, Shape{8, 5, 128}, Shape{640, 128, 1}, 1);
  EXPECT_EQ(plan_contiguous(transpose(x, 0, 1)).unit, 2);
  // A slice with gaps: rows of 128 floats, 200 apart; 16-byte aligned at column 4, not at 3.
  Tensor m = empty(Shape{64, 200});
  CopyPlan a = plan_contiguous(slice(m, 1, 4, 132)), b = plan_contiguous(slice(m, 1, 3, 131));
  EXPECT_EQ(a.path, Path::Rows);
  EXPECT_EQ(sizes(a), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(a.unit, 16);
  EXPECT_EQ(b.unit, 4);
  // Elements of 8 bytes: 16-byte units hold two.
  EXPECT_EQ(plan_contiguous(transpose(empty(Shape{4, 3, 2}, DType::f64), 0, 1)).unit, 16);
  EXPECT_EQ(plan_contiguous(transpose(empty(Shape{4, 3, 3}, DType::f64), 0, 1)).unit, 8);
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
  CopyPlan t = plan_contiguous(transpose(empty(Shape{300, 77}), 0, 1));
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

// ---- the CUDA kernels against the CPU, bit for bit ------------------------------------------

#define REQUIRE_GPU() \
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build): GPU copies not run"

namespace {

const MemoryFormat CL = MemoryFormat::ChannelsLast;

// A host tensor of random bits: a copy moves bits whatever the dtype (NaN patterns included).
Tensor random_bits(const Shape& s, DType t, uint64_t seed) {
  Tensor x = empty(s, t);
  auto* p = static_cast<uint8_t*>(x.data_ptr());
  for (size_t i = 0; i < x.nbytes(); i += 16) {
    Philox4 r = philox(seed, i / 16, 5);
    std::memcpy(p + i, r.v, std::min<size_t>(16, x.nbytes() - i));
  }
  return x;
}

// The whole buffer under a dense tensor (contiguous or channels-last), brought to the host as it
// lies: no strided copy on the way, so what is compared is what the kernel wrote.
std::vector<uint8_t> raw_bytes(const Tensor& t) {
  Tensor h = to(as_strided(t, Shape{t.numel()}, Shape{1}, t.impl()->offset), kCPU);
  std::vector<uint8_t> b(h.nbytes());
  std::memcpy(b.data(), h.data_ptr(), b.size());
  return b;
}

void expect_same_bytes(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) FAIL() << what << ": first differing byte " << i << " of " << a.size();
}

// view(base) made dense in `fmt` on the CPU and on the GPU: the same bits and strides. Returns the
// plan the GPU's copy ran (for the caller to check which kernel that was).
CopyPlan expect_copy_exact(const Tensor& base, const std::function<Tensor(const Tensor&)>& view, const std::string& what,
                           MemoryFormat fmt = MemoryFormat::Contiguous) {
  Tensor vc = view(base), vg = view(to(base, kCUDA));
  Tensor oc = contiguous(vc, fmt), og = contiguous(vg, fmt);
  EXPECT_FALSE(og.same(vg)) << what << ": no copy was made";
  EXPECT_EQ(oc.strides(), og.strides()) << what;
  expect_same_bytes(raw_bytes(oc), raw_bytes(og), what);
  return plan_for(og, vg);
}

}  // namespace

TEST(CudaCopy, BatchSequenceSwapsHalf) {
  REQUIRE_GPU();
  // imdb_bilstm: [N, T, F] <-> [T, N, F] around cuDNN; char_lstm: [N, T, 57] and [N, T, 128].
  for (Shape s : {Shape{1024, 100, 128}, Shape{100, 1024, 128}, Shape{1024, 40, 128}, Shape{1000, 40, 57}}) {
    Tensor x = random_bits(s, DType::f16, uint64_t(s[2]));
    CopyPlan p = expect_copy_exact(x, [](const Tensor& t) { return transpose(t, 0, 1); }, "half " + s.str());
    EXPECT_EQ(p.path, CopyPlan::Path::Rows) << s.str();
    EXPECT_EQ(p.unit, s[2] == 57 ? 2 : 16) << s.str();
  }
}

TEST(CudaCopy, ChannelsLastRoundTrips) {
  REQUIRE_GPU();
  // Odd sizes (partial tiles on every side), mnist_cnn's activations and a conv filter.
  struct Case { Shape s; DType t; };
  for (Case c : {Case{{37, 3, 13, 11}, DType::f32}, Case{{37, 19, 13, 11}, DType::f32}, Case{{1024, 64, 12, 12}, DType::f16},
                 Case{{64, 32, 3, 3}, DType::f16}, Case{{5, 33, 7, 9}, DType::f64}}) {
    Tensor x = random_bits(c.s, c.t, uint64_t(c.s[0]));
    std::string what = std::string(dtype_name(c.t)) + " " + c.s.str();
    CopyPlan to = expect_copy_exact(x, [](const Tensor& t) { return t; }, what + " to channels-last", CL);
    CopyPlan back = expect_copy_exact(x, [](const Tensor& t) { return contiguous(t, CL); }, what + " from channels-last");
    // Tiles where channels and pixels both fill half a tile; the general kernel where not.
    CopyPlan::Path want = std::min(c.s[1], c.s[2] * c.s[3]) >= 16 ? CopyPlan::Path::Transpose : CopyPlan::Path::General;
    EXPECT_EQ(to.path, want) << what;
    EXPECT_EQ(back.path, want) << what;
  }
}

TEST(CudaCopy, EveryElementSize) {
  REQUIRE_GPU();
  for (DType t : {DType::u8, DType::bf16, DType::i32, DType::f64}) {
    std::string n = dtype_name(t);
    Tensor m = random_bits(Shape{300, 77}, t, 1), r = random_bits(Shape{33, 65, 7}, t, 2);
    Tensor c = random_bits(Shape{5, 20, 9, 11}, t, 3), g = random_bits(Shape{3, 4, 5, 6, 7, 2}, t, 4);
    EXPECT_EQ(expect_copy_exact(m, [](const Tensor& x) { return transpose(x, 0, 1); }, n + " 2-D transpose").path, CopyPlan::Path::Transpose);
    EXPECT_EQ(expect_copy_exact(r, [](const Tensor& x) { return transpose(x, 0, 1); }, n + " rows").path, CopyPlan::Path::Rows);
    EXPECT_EQ(expect_copy_exact(c, [](const Tensor& x) { return x; }, n + " to channels-last", CL).path,
              CopyPlan::Path::Transpose);
    // Every other element: no dimension of stride 1 in src.
    auto evens = [](const Tensor& x) { return as_strided(x, Shape{3, 4, 5, 6, 7}, Shape{1680, 420, 84, 14, 2}, 0); };
    EXPECT_EQ(expect_copy_exact(g, evens, n + " every other element").path, CopyPlan::Path::General);
  }
}

TEST(CudaCopy, MisalignedGappedAndSizeOneViews) {
  REQUIRE_GPU();
  // One element in: no vector loads.
  Tensor h = random_bits(Shape{1 + 8 * 50 * 128}, DType::f16, 6);
  auto shifted = [](const Tensor& b) { return transpose(as_strided(b, Shape{8, 50, 128}, Shape{6400, 128, 1}, 1), 0, 1); };
  EXPECT_EQ(expect_copy_exact(h, shifted, "half at an odd offset").unit, 2);
  // Slices with gaps between rows: aligned at column 4, not at 3.
  Tensor m = random_bits(Shape{640, 200}, DType::f32, 7);
  EXPECT_EQ(expect_copy_exact(m, [](const Tensor& x) { return slice(x, 1, 4, 132); }, "slice at 4").unit, 16);
  EXPECT_EQ(expect_copy_exact(m, [](const Tensor& x) { return slice(x, 1, 3, 131); }, "slice at 3").unit, 4);
  // Size-1 dimensions around a transpose.
  Tensor o = random_bits(Shape{37, 1, 64, 1}, DType::f32, 8);
  EXPECT_EQ(expect_copy_exact(o, [](const Tensor& x) { return transpose(x, 0, 2); }, "size-1 dims").path,
            CopyPlan::Path::Transpose);
  // Into a slice with gaps: the bytes between the rows must stay as they were.
  Tensor src = random_bits(Shape{300, 77}, DType::f16, 9), buf = random_bits(Shape{310, 90}, DType::f16, 10);
  Tensor buf_g = to(buf, kCUDA);
  copy_(slice(slice(buf, 0, 5, 305), 1, 6, 83), transpose(contiguous(transpose(src, 0, 1)), 0, 1));
  copy_(slice(slice(buf_g, 0, 5, 305), 1, 6, 83), transpose(contiguous(transpose(to(src, kCUDA), 0, 1)), 0, 1));
  expect_same_bytes(raw_bytes(buf), raw_bytes(buf_g), "into a slice");
}

TEST(CudaCopy, PermutationsOf5D) {
  REQUIRE_GPU();
  Tensor x = random_bits(Shape{6, 5, 16, 3, 20}, DType::f32, 11);
  Tensor pairs = random_bits(Shape{6, 5, 4, 3, 7, 2}, DType::f32, 12);
  auto perm = [](std::vector<int> order) { return [order](const Tensor& t) { return permuted(t, order); }; };
  EXPECT_EQ(expect_copy_exact(x, perm({2, 3, 0, 1, 4}), "rows").path, CopyPlan::Path::Rows);
  EXPECT_EQ(expect_copy_exact(x, perm({4, 1, 0, 3, 2}), "transpose, 3 batch dims").path, CopyPlan::Path::Transpose);
  EXPECT_EQ(expect_copy_exact(x, perm({1, 4, 3, 0, 2}), "transpose inside").path, CopyPlan::Path::Transpose);
  auto evens = [](const Tensor& t) {
    return permuted(as_strided(t, Shape{6, 5, 4, 3, 7}, Shape{840, 168, 42, 14, 2}, 0), {4, 2, 0, 3, 1});
  };
  EXPECT_EQ(expect_copy_exact(pairs, evens, "general").path, CopyPlan::Path::General);
}

TEST(CudaCopy, PastTheGridLimits) {
  REQUIRE_GPU();
  // 18M rows of 2 bytes (more than 65535 blocks of 256 rows) and 70000 transposes in one batch.
  Tensor r = random_bits(Shape{2, 9000000, 2}, DType::u8, 13);
  EXPECT_EQ(expect_copy_exact(r, [](const Tensor& x) { return transpose(x, 0, 1); }, "many rows").path, CopyPlan::Path::Rows);
  Tensor t = random_bits(Shape{70000, 16, 17}, DType::u8, 14);
  EXPECT_EQ(expect_copy_exact(t, [](const Tensor& x) { return transpose(x, 1, 2); }, "big batch").path,
            CopyPlan::Path::Transpose);
}

TEST(CudaCopy, OffsetsPast2To31Use64BitIndices) {
  REQUIRE_GPU();
  // Views 2^30 bytes apart in a buffer of 2 GiB: each kernel on 64-bit indices. Only the bytes
  // the views read are random; the rest is zero (and never read).
  const int64_t gap = int64_t(1) << 30, part = 8192, n = 2 * gap + part;
  Tensor base = empty(Shape{n}, DType::u8);
  std::memset(base.data_ptr(), 0, size_t(n));
  for (int k = 0; k < 3; ++k) {
    Tensor r = random_bits(Shape{part}, DType::u8, uint64_t(20 + k));
    std::memcpy(base.data<uint8_t>() + k * gap, r.data_ptr(), size_t(part));
  }
  struct Case { Shape st; CopyPlan::Path path; };
  for (Case c : {Case{{gap, 50, 1}, CopyPlan::Path::Rows}, Case{{gap, 1, 40}, CopyPlan::Path::Transpose},
                 Case{{gap, 2, 80}, CopyPlan::Path::General}}) {
    Shape st = c.st;
    CopyPlan p = expect_copy_exact(base, [st](const Tensor& b) { return as_strided(b, Shape{3, 40, 50}, st, 0); },
                                   std::string("64-bit ") + copy_path_name(c.path));
    EXPECT_EQ(p.path, c.path);
    EXPECT_FALSE(p.index32);
  }
}

// add_out, with which autograd sums gradients (core/copy.h's add kernel): CUDA against the CPU on
// random values, float32 into float32 and float16/bfloat16 into float32 (mixed precision), a
// strided operand, and float64. Both compute in float32 (float64 for float64) and round once, so
// the results agree bit for bit.
TEST(CudaCopy, AddOutMatchesTheCpu) {
  REQUIRE_GPU();
  auto random = [](const Shape& s, uint64_t seed) {
    std::vector<float> v(size_t(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(philox_uniform(seed, 0, i) * 4 - 2);
    return from_vector(v, s);
  };
  const Shape s{37, 129};
  for (DType bt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const DType dt = bt == DType::f64 ? DType::f64 : DType::f32;
    Tensor a = to(random(s, 1), dt), b = to(random(s, 2), bt);
    Tensor bs = transpose(to(random(Shape{129, 37}, 3), bt), 0, 1);  // strided
    for (const Tensor& bb : {b, bs}) {
      Tensor cpu = empty(s, dt), gpu = empty(s, dt, kCUDA);
      add_out(cpu, a, bb);
      add_out(gpu, to(a, kCUDA), to(bb, kCUDA));
      EXPECT_EQ(to(gpu, kCPU).to_vector<double>(), cpu.to_vector<double>()) << dtype_name(bt);
    }
  }
}

// A channels-last convolution's filter gradient ([K, R, S, C] in memory) into a contiguous float32
// gradient, in the same launch as same-layout pairs: as the CPU's add_out (or cast, with `write`)
// gives it, bit for bit, for 3x3, 1x1 and one-channel filters and chunk-crossing sizes.
TEST(CudaCopy, AddManyTakesAChannelsLastFilterGradient) {
  REQUIRE_GPU();
  const Shape shapes[] = {{32, 3, 3, 3}, {64, 32, 3, 3}, {8, 5, 1, 1}, {7, 1, 3, 3}, {5, 3, 2, 5}};
  for (bool write : {false, true})
    for (DType st : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(write ? "write " : "add ") + dtype_name(st));
      std::vector<std::pair<Tensor, Tensor>> gpu;
      std::vector<Tensor> want;
      uint64_t k = 0;
      for (const Shape& sh : shapes) {
        std::vector<float> d(size_t(sh.numel())), g(size_t(sh.numel()));
        for (size_t i = 0; i < d.size(); ++i) {
          d[i] = philox_uniform(5, k, i);
          g[i] = philox_uniform(6, k, i) - 0.5f;
        }
        ++k;
        Tensor dc = from_vector(d, sh), gc = to(from_vector(g, sh), st);  // g's values in logical order
        Tensor w = empty(sh);
        write ? copy_(w, to(gc, DType::f32)) : add_out(w, dc, to(gc, DType::f32));
        want.push_back(w);
        gpu.emplace_back(to(dc, kCUDA), contiguous(to(gc, kCUDA), MemoryFormat::ChannelsLast));
        gpu.emplace_back(to(dc, kCUDA), to(gc, kCUDA));  // a same-layout pair beside it
        want.push_back(w);
      }
      kernels<CopyKernels>(kCUDA).add_many(current_context(), gpu, write);
      for (size_t i = 0; i < gpu.size(); ++i)
        EXPECT_EQ(to(gpu[i].first, kCPU).to_vector<float>(), want[i].to_vector<float>()) << "pair " << i;
    }
}

// The backward pass's one launch for every leaf's gradient (CopyKernels::add_many): each pair as
// the CPU's add gives it, bit for bit, over more pairs than one launch takes (48), gradients of
// every floating type into float32, sizes across the kernel's 1024-element chunks, and float64
// (added one by one). With `write`, each pair as the CPU's cast gives it.
TEST(CudaCopy, AddManyIsEachPairsAdd) {
  REQUIRE_GPU();
  for (bool write : {false, true}) {
    SCOPED_TRACE(write ? "write" : "add");
    std::vector<std::pair<Tensor, Tensor>> gpu, cpu;
    const DType types[] = {DType::f32, DType::f16, DType::bf16};
    for (int k = 0; k < 60; ++k) {
      const int64_t n = k == 7 ? 5000 : 1 + (k * 389) % 2100;
      std::vector<float> d(static_cast<size_t>(n)), s(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        d[size_t(i)] = philox_uniform(5, uint64_t(k), uint64_t(i));
        s[size_t(i)] = philox_uniform(6, uint64_t(k), uint64_t(i)) - 0.5f;
      }
      const bool f64 = k == 11;
      const DType dt = f64 ? DType::f64 : DType::f32, st = f64 ? DType::f64 : types[k % 3];
      Tensor dc = to(from_vector(d, Shape{n}), dt), sc = to(from_vector(s, Shape{n}), st);
      cpu.emplace_back(dc, sc);
      gpu.emplace_back(to(dc, kCUDA), to(sc, kCUDA));
    }
    kernels<CopyKernels>(kCUDA).add_many(current_context(), gpu, write);
    kernels<CopyKernels>(kCPU).add_many(current_context(), cpu, write);
    for (size_t k = 0; k < cpu.size(); ++k) {
      const Tensor a = to(cpu[k].first, DType::f64), b = to(to(gpu[k].first, kCPU), DType::f64);
      EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << "pair " << k;
      if (write) EXPECT_EQ(a.to_vector<double>(), to(cpu[k].second, DType::f64).to_vector<double>()) << "pair " << k;
    }
  }
}

