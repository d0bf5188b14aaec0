// The CPU's float32 convolution through oneDNN (ops/backend/conv_dnnl.cpp) against the im2col + GEMM
// reference (ops/conv_cpu.cpp), forward and both backward passes, on random inputs: the float64
// gradient checks (test_ops_grad) never reach oneDNN. Both of oneDNN's layouts (its own with
// reorders, and plain NCHW), and the op itself as the table dispatches it. Without oneDNN the
// oneDNN cases skip and the op's case checks the fallback. Then max pooling's tiled CPU kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "core/philox.h"
#include "core/thread_pool.h"
#include "ops/conv.h"
#include "ops/conv_cpu.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "skip.h"

using namespace loupe;
namespace detail = loupe::cpu::detail;

namespace {

struct ConvShape {
  int64_t N, C, H, W, K, R, S;
  int sh, sw, ph, pw;
  std::string name() const {
    return "N" + std::to_string(N) + "_C" + std::to_string(C) + "_" + std::to_string(H) + "x" + std::to_string(W) +
           "_K" + std::to_string(K) + "_" + std::to_string(R) + "x" + std::to_string(S) + "_s" + std::to_string(sh) +
           std::to_string(sw) + "_p" + std::to_string(ph) + std::to_string(pw);
  }
  Conv2dParams params() const {
    Conv2dParams p;
    p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
    return p;
  }
  Shape x() const { return Shape{N, C, H, W}; }
  Shape w() const { return Shape{K, C, R, S}; }
  Shape y() const { return Shape{N, K, (H + 2 * ph - R) / sh + 1, (W + 2 * pw - S) / sw + 1}; }
};

std::vector<ConvShape> shapes() {
  return {
      {2, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0},   // mnist_cnn's first layer: C = 1
      {3, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0},  // its second
      {1, 3, 32, 32, 32, 3, 3, 1, 1, 1, 1},   // batch 1, "same" padding
      {4, 16, 15, 15, 24, 3, 3, 2, 2, 1, 1},  // stride 2, odd sizes
      {3, 5, 7, 9, 6, 3, 5, 1, 2, 2, 1},      // odd everything, unequal strides and padding
      {2, 8, 13, 11, 4, 1, 1, 1, 1, 0, 0},    // 1x1
      {2, 7, 9, 10, 16, 3, 3, 3, 3, 0, 0},    // stride 3, a column left over (negative right padding)
      {2, 4, 7, 6, 3, 1, 1, 2, 2, 0, 0},      // stride beyond the kernel
      {5, 32, 12, 12, 64, 5, 5, 1, 1, 2, 2},
  };
}

Tensor random(const Shape& s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& f : v) f = u(gen);
  return from_vector(v, s);
}

// max |a - b| within 1e-4 of the reference's largest magnitude (float32 sums in another order).
void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
  std::vector<float> a = got.to_vector<float>(), b = ref.to_vector<float>();
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    err = std::max(err, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(err, 1e-4f * std::max(scale, 1.f)) << what << ": max abs error " << err << " at scale " << scale;
}

struct Reference {
  Tensor y, gx, gw;
};

Reference reference(const ConvShape& c, const Tensor& x, const Tensor& w, const Tensor& gy) {
  Reference r{empty(c.y()), empty(c.x()), empty(c.w())};
  detail::conv_forward_im2col(r.y, x, w, c.params());
  detail::conv_backward_im2col(r.gx, r.gw, x, w, gy, c.params());
  return r;
}

struct PathGuard {
  detail::ConvPath saved = detail::conv_path();
  ~PathGuard() { detail::set_conv_path(saved); }
};

}  // namespace

class ConvCpu : public ::testing::TestWithParam<ConvShape> {};

// Each of oneDNN's layouts, each direction alone and both gradients together.
TEST_P(ConvCpu, DnnlMatchesIm2col) {
  if (cpu::dnnl_version().empty() && LOUPE_DNNL_OFF) LOUPE_SKIP_NOT_HERE << "configured with LOUPE_DNNL=OFF";
  if (cpu::dnnl_version().empty()) GTEST_SKIP() << "built without oneDNN: libdnnl-dev not found (tools/setup.sh installs it)";
  const ConvShape& c = GetParam();
  NoGradGuard ng;
  Tensor x = random(c.x(), 1), w = random(c.w(), 2), gy = random(c.y(), 3);
  Reference ref = reference(c, x, w, gy);
  for (bool any : {true, false}) {
    const std::string what = c.name() + (any ? " (oneDNN's layouts)" : " (plain NCHW)");
    Tensor y = empty(c.y());
    ASSERT_TRUE(detail::conv_forward_dnnl(y, x, w, c.params(), any)) << what << ": oneDNN refused the shapes";
    expect_close(y, ref.y, what + " forward");
    Tensor gx = empty(c.x()), gw = empty(c.w());
    ASSERT_TRUE(detail::conv_backward_dnnl(gx, gw, x, w, gy, c.params(), any)) << what;
    expect_close(gx, ref.gx, what + " backward data (with weights)");
    expect_close(gw, ref.gw, what + " backward weights (with data)");
    Tensor gx_only = empty(c.x()), gw_only = empty(c.w());
    ASSERT_TRUE(detail::conv_backward_dnnl(gx_only, Tensor(), x, w, gy, c.params(), any)) << what;
    ASSERT_TRUE(detail::conv_backward_dnnl(Tensor(), gw_only, x, w, gy, c.params(), any)) << what;
    expect_close(gx_only, ref.gx, what + " backward data alone");
    expect_close(gw_only, ref.gw, what + " backward weights alone");
    // Cached primitives, new data: a second call with other inputs is right too.
    Tensor x2 = random(c.x(), 4);
    Tensor y2 = empty(c.y()), y2_ref = empty(c.y());
    ASSERT_TRUE(detail::conv_forward_dnnl(y2, x2, w, c.params(), any));
    detail::conv_forward_im2col(y2_ref, x2, w, c.params());
    expect_close(y2, y2_ref, what + " forward, second call");
  }
}

// The op as the model calls it, through autograd, on one thread and on several: by the table's
// default and by each path forced.
TEST_P(ConvCpu, OpMatchesIm2col) {
  const ConvShape& c = GetParam();
  PathGuard guard;
  const int saved_threads = num_threads();
  for (auto [path, threads] : {std::pair{detail::ConvPath::Auto, 1}, {detail::ConvPath::Auto, 3},
                               {detail::ConvPath::Im2col, 2},
                               {detail::ConvPath::DnnlAny, 2}, {detail::ConvPath::DnnlPlain, 1}}) {
    detail::set_conv_path(path);
    set_num_threads(threads);
    Tensor x = random(c.x(), 5), w = random(c.w(), 6), gy = random(c.y(), 7);
    Reference ref = reference(c, x, w, gy);
    x.requires_grad_(true);
    w.requires_grad_(true);
    Tensor y = conv2d(x, w, c.params());
    backward(y, gy);
    const std::string what = c.name() + " by path " + std::to_string(int(path)) + " on " + std::to_string(threads) + " threads";
    expect_close(y.detach(), ref.y, what + " forward");
    expect_close(x.grad(), ref.gx, what + " x.grad");
    expect_close(w.grad(), ref.gw, what + " w.grad");
  }
  set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvCpu, ::testing::ValuesIn(shapes()),
                         [](const auto& info) { return info.param.name(); });

TEST(ConvCpuPath, VersionSaysWhetherOneDnnIsBuilt) {
#if defined(LOUPE_EXPECT_DNNL)
  EXPECT_EQ(cpu::dnnl_version().empty(), LOUPE_EXPECT_DNNL == 0) << cpu::dnnl_version();
#endif
  detail::ConvPath path = detail::conv_path();
  EXPECT_EQ(path, detail::ConvPath::Auto);
}

// Max pooling's tiled kernels (kernel == stride, no padding: ops/pool_cpu.cpp) at real sizes in
// float32, with ties (the first element equal to the max takes the gradient) and edges no window
// covers, against a naive reference; with dropout, the one-op path against pooling then dropout().
TEST(PoolCpu, TiledMaxMatchesNaiveWithTiesAndFusedDropout) {
  for (Shape s : {Shape{16, 32, 32, 32}, Shape{8, 64, 13, 11}})
    for (int k : {2, 3}) {
      SCOPED_TRACE(s.str() + " kernel " + std::to_string(k));
      Pool2dParams p;
      p.kernel_h = p.kernel_w = p.stride_h = p.stride_w = k;
      std::vector<float> v(size_t(s.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = std::round((philox_uniform(4, 0, i) * 2.f - 1.f) * 8.f) / 4.f;
      const int64_t NC = s[0] * s[1], H = s[2], W = s[3], P = H / k, Q = W / k;
      std::vector<float> y_ref(size_t(NC * P * Q)), gy(y_ref.size()), gx_ref(v.size(), 0.f);
      for (size_t i = 0; i < gy.size(); ++i) gy[i] = philox_uniform(5, 0, i) - 0.5f;
      for (int64_t nc = 0; nc < NC; ++nc)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < Q; ++j) {
            int64_t arg = -1;
            for (int64_t r = 0; r < k; ++r)
              for (int64_t c = 0; c < k; ++c) {
                const int64_t at = (nc * H + i * k + r) * W + j * k + c;
                if (arg < 0 || v[size_t(at)] > v[size_t(arg)]) arg = at;
              }
            const size_t o = size_t((nc * P + i) * Q + j);
            y_ref[o] = v[size_t(arg)];
            gx_ref[size_t(arg)] = gy[o];
          }
      Tensor x = from_vector(v, s).requires_grad_(true);
      Tensor y = max_pool2d(x, p);
      ASSERT_EQ(y.shape(), (Shape{s[0], s[1], P, Q}));
      EXPECT_EQ(y.to_vector<float>(), y_ref);
      Tensor g = from_vector(gy, y.shape());
      backward(sum(mul(y, g)));
      EXPECT_EQ(x.grad().to_vector<float>(), gx_ref);
      // Dropout in the same op against dropout() after pooling: the same draw, the same values.
      Tensor x1 = from_vector(v, s).requires_grad_(true), x2 = from_vector(v, s).requires_grad_(true);
      manual_seed(8);
      Tensor y1 = max_pool2d(x1, p, 0.4, true);
      manual_seed(8);
      Tensor y2 = dropout(max_pool2d(x2, p), 0.4, true);
      EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
      backward(sum(mul(y1, g)));
      backward(sum(mul(y2, g)));
      EXPECT_EQ(x1.grad().to_vector<float>(), x2.grad().to_vector<float>());
    }
}

// Max pooling's general path (overlapping, padded windows): a tie gives the window's gradient to
// its first in-bounds element, as the tiled path does (PoolCpu.TiledMaxMatchesNaive...); only
// that one had a tie test.
TEST(PoolCpu, OverlappingPaddedMaxTiesGoToTheFirst) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  Tensor x = from_vector(std::vector<float>(25, 1.f), Shape{1, 1, 5, 5}).requires_grad_(true);
  Tensor y = max_pool2d(x, p);  // 3x3 windows over a 5x5 plane of ties
  backward(sum(y));
  std::vector<float> want(25, 0.f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want[size_t(std::max(0, 2 * i - 1) * 5 + std::max(0, 2 * j - 1))] += 1;
  EXPECT_EQ(x.grad().to_vector<float>(), want);
}

// A window that passes the (padded) input is refused, also by less than a stride: (6 - 7) / 2 + 1 is
// 1 in C++ (division toward zero), which a check of the output size alone took for a 1x1 output and
// the tiled kernel then read past the plane. A window that just fits gives one output.
TEST(PoolCpu, AWindowPastTheInputIsRefused) {
  auto refusal = [](int kernel, int stride, int pad, int64_t side) {
    Pool2dParams p;
    p.kernel_h = p.kernel_w = kernel;
    p.stride_h = p.stride_w = stride;
    p.pad_h = p.pad_w = pad;
    try {
      max_pool2d(zeros(Shape{1, 1, side, side}), p);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(7, 2, 0, 6).find("a 7x7 window does not fit a 6x6 input"), std::string::npos);
  EXPECT_NE(refusal(7, 7, 0, 6).find("does not fit"), std::string::npos);
  EXPECT_NE(refusal(4, 2, 1, 1).find("does not fit"), std::string::npos);  // 1 + 2 padding < 4
  EXPECT_EQ(refusal(6, 2, 0, 6), "accepted");
  EXPECT_EQ(refusal(3, 2, 1, 1), "accepted");
  Pool2dParams fits;
  fits.kernel_h = fits.kernel_w = 6;
  EXPECT_EQ(max_pool2d(zeros(Shape{1, 1, 6, 6}), fits).shape(), (Shape{1, 1, 1, 1}));
}
