// Tensor basics: views, copies, dtypes, broadcasting errors, the RNG, precision modes and memory formats.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/denormals.h"
#include "core/host_cache.h"
#include "core/thread_pool.h"
#include "loupe.h"
#include "models/registry.h"
#include "skip.h"

using namespace loupe;

TEST(Tensor, ViewsShareStorage) {
  Tensor x = from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{2, 3});
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(contiguous(t).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor s = slice(x, 1, 1, 3);
  EXPECT_EQ(contiguous(s).to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  Tensor r = reshape(x, Shape{3, 2});
  EXPECT_EQ(r.data_ptr(), x.data_ptr());
  EXPECT_EQ(flatten(x, 0).shape(), (Shape{6}));
}

TEST(Tensor, DtypeConversionsRoundTrip) {
  Tensor x = from_vector(std::vector<float>{0.5f, -2.25f, 1024.f, 3.1415926f, 1e-5f}, Shape{5});
  std::vector<float> h = to(to(x, DType::f16), DType::f32).to_vector<float>();
  EXPECT_FLOAT_EQ(h[0], 0.5f);
  EXPECT_FLOAT_EQ(h[1], -2.25f);
  EXPECT_FLOAT_EQ(h[2], 1024.f);
  EXPECT_NEAR(h[3], 3.1415926f, 2e-3);
  EXPECT_NEAR(h[4], 1e-5f, 1e-7);
  std::vector<float> b = to(to(x, DType::bf16), DType::f32).to_vector<float>();
  EXPECT_NEAR(b[3], 3.1415926f, 2e-2);
  EXPECT_EQ(to(x, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{0, -2, 1024, 3, 0}));
  EXPECT_EQ(half_to_float(float_to_half(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

TEST(Tensor, BroadcastErrorsAreClear) {
  Tensor a = zeros(Shape{2, 3}), b = zeros(Shape{4});
  try {
    (void)(a + b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3] and [4] do not broadcast"), std::string::npos) << e.what();
  }
}

TEST(Random, PhiloxIsDeterministicAndUniform) {
  double s = 0;
  for (uint64_t i = 0; i < 40000; ++i) s += philox_uniform(7, 0, i);
  EXPECT_NEAR(s / 40000, 0.5, 0.01);
  EXPECT_EQ(philox_uniform(7, 3, 5), philox_uniform(7, 3, 5));
  EXPECT_NE(philox_uniform(7, 3, 5), philox_uniform(8, 3, 5));
}

TEST(Precision, ParseAndRefuse) {
  EXPECT_EQ(parse_precision("fp32"), Precision::FP32);
  EXPECT_EQ(parse_precision("tf32"), Precision::TF32);
  EXPECT_STREQ(precision_name(Precision::TF32), "tf32");
  EXPECT_EQ(parse_precision("fp16"), Precision::FP16);
  EXPECT_EQ(parse_precision("bf16"), Precision::BF16);
  EXPECT_THROW(parse_precision("double"), Error);
  EXPECT_EQ(precision(), Precision::FP32);  // the default
  EXPECT_EQ(compute_dtype(), DType::f32);
  // The CPU has no tensor cores: every mode but fp32 is refused there, never run as fp32.
  EXPECT_EQ(precision_unsupported(Precision::FP32, kCPU), "");
  for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16})
    EXPECT_NE(precision_unsupported(p, kCPU).find("GPU mode"), std::string::npos) << precision_name(p);
  {
    PrecisionScope bf16(Precision::BF16);
    EXPECT_EQ(compute_dtype(), DType::bf16);
    {
      PrecisionScope fp16(Precision::FP16);  // scopes nest
      EXPECT_EQ(compute_dtype(), DType::f16);
    }
    EXPECT_EQ(precision(), Precision::BF16);
    Precision other = Precision::FP32;
    std::thread([&] { other = precision(); }).join();  // per thread: another thread is unaffected
    EXPECT_EQ(other, Precision::FP32);
  }
  EXPECT_EQ(precision(), Precision::FP32);
}

TEST(MemoryFormat, ChannelsLastStridesConversionAndOps) {
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  EXPECT_EQ(strides_for(Shape{2, 3, 4, 5}, CL), (Shape{60, 1, 15, 3}));
  std::vector<float> v(120);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Tensor x = from_vector(v, Shape{2, 3, 4, 5});
  EXPECT_EQ(x.memory_format(), MemoryFormat::Contiguous);
  Tensor y = contiguous(x, CL);
  EXPECT_EQ(y.memory_format(), CL);
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TRUE(y.is_contiguous(CL));
  // Element (n, c, h, w) keeps its value; memory holds it at ((n*H + h)*W + w)*C + c.
  const float* raw = y.data<float>();
  EXPECT_EQ(raw[((1 * 4 + 2) * 5 + 3) * 3 + 1], v[((1 * 3 + 1) * 4 + 2) * 5 + 3]);
  EXPECT_EQ(y.to_vector<float>(), v);
  EXPECT_TRUE(contiguous(y, CL).same(y));
  EXPECT_EQ(contiguous(y).to_vector<float>(), v);
  // One channel: the memory order is the same, so the conversion restrides without copying.
  Tensor one = from_vector(std::vector<float>(8, 1.f), Shape{2, 1, 2, 2});
  Tensor one_cl = contiguous(one, CL);
  EXPECT_EQ(one_cl.memory_format(), CL);
  EXPECT_EQ(one_cl.data_ptr(), one.data_ptr());
  // And back: a one-channel image permuted from [N, H, W, 1] has channels-last's exact strides;
  // asked for NCHW it is restrided, not returned as it is (its convolutions would run channels-last).
  Tensor nhwc = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 2, 2, 1});
  Tensor permuted = transpose(transpose(nhwc, 1, 3), 2, 3);
  EXPECT_EQ(permuted.memory_format(), CL);
  Tensor nchw = contiguous(permuted, MemoryFormat::Contiguous);
  EXPECT_EQ(nchw.memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(nchw.data_ptr(), nhwc.data_ptr());
  EXPECT_EQ(nchw.to_vector<float>(), nhwc.to_vector<float>());
  EXPECT_TRUE(contiguous(x, MemoryFormat::Contiguous).same(x));
  // Ops with a channels-last path keep the format; a reshape reads it as NCHW.
  Tensor w = full(Shape{2, 3, 1, 1}, 0.5);
  Tensor c = conv2d(y, w, Conv2dParams{});
  EXPECT_EQ(c.memory_format(), CL);
  EXPECT_EQ(c.to_vector<float>(), conv2d(x, w, Conv2dParams{}).to_vector<float>());
  EXPECT_EQ(relu(c).memory_format(), CL);
  EXPECT_EQ(max_pool2d(c, Pool2dParams{}).memory_format(), CL);
  EXPECT_EQ(flatten(c, 1).to_vector<float>(), flatten(conv2d(x, w, Conv2dParams{}), 1).to_vector<float>());
  EXPECT_THROW(strides_for(Shape{2, 3}, CL), Error);
}

// A whole model in channels-last gives the NCHW model's outputs and gradients (float32: equal up
// to summation order).
TEST(MemoryFormat, Cifar10CnnChannelsLastMatchesNchw) {
  const models::ModelInfo& info = models::find_model("cifar10_cnn");
  auto run = [&](MemoryFormat f) {
    manual_seed(3);
    auto m = info.build();
    m->to(kCPU);
    m->set_memory_format(f);
    m->eval();  // no dropout: the masks follow memory order, so they differ between layouts
    std::vector<float> v(2 * 3 * 32 * 32);
    for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(5, 0, i);
    Tensor y = (*m)(from_vector(v, Shape{2, 3, 32, 32}));
    backward(sum(y * y));
    return std::make_pair(y.to_vector<float>(), m->arena().grads().to_vector<float>());
  };
  auto a = run(MemoryFormat::Contiguous), b = run(MemoryFormat::ChannelsLast);
  ASSERT_EQ(a.first.size(), b.first.size());
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_NEAR(a.first[i], b.first[i], 1e-5) << i;
  ASSERT_EQ(a.second.size(), b.second.size());
  for (size_t i = 0; i < a.second.size(); ++i) ASSERT_NEAR(a.second[i], b.second[i], 1e-5 + 1e-4 * std::abs(a.second[i])) << i;
}

// add_out, which the autograd engine sums gradients with: any operand layout, and a 16-bit b added
// into a float32 dst (mixed precision: float16 gradients into the float32 arena).
TEST(Tensor, AddOutTakesAnyLayoutAndANarrowerB) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor bt = transpose(from_vector(std::vector<float>{10, 40, 20, 50, 30, 60}, Shape{3, 2}), 0, 1);  // strided
  Tensor dst = empty(Shape{2, 3});
  add_out(dst, a, bt);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  Tensor h = to(from_vector(std::vector<float>{0.5f, 0.25f, -1, 2, 1024, 3}, Shape{2, 3}), DType::f16);
  add_out(a, a, h);  // in place
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, 2.25f, 2, 6, 1029, 9}));
  EXPECT_THROW(add_out(h, a, a), Error) << "dst and a must share a dtype";
  // A transposed gradient added in place into a weight's (tiles of 32, with ragged edges).
  const int64_t R = 70, C = 45;
  std::vector<float> w(R * C), g(C * R);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 97) * 0.5f, g[i] = float(i % 89) - 40;
  Tensor W = from_vector(w, Shape{R, C});
  add_out(W, W, transpose(from_vector(g, Shape{C, R}), 0, 1));
  std::vector<float> got = W.to_vector<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(got[r * C + c], w[r * C + c] + g[c * R + r]) << r << "," << c;
}

// Large host blocks go back to a cache and come out again (no page faults on the next step).
TEST(HostCache, LargeBlocksAreReusedSmallOnesLeftToMalloc) {
  const size_t before = host_cached_bytes();
  void* p = host_alloc(size_t(1) << 20);
  host_free(p, size_t(1) << 20);
  if (host_cached_bytes() == before) LOUPE_SKIP_NOT_HERE << "the cache is off (AddressSanitizer build)";
  EXPECT_EQ(host_cached_bytes(), before + (size_t(1) << 20));
  void* q = host_alloc((size_t(1) << 20) - 100);  // the same 4 KiB-rounded size
  EXPECT_EQ(q, p);
  EXPECT_EQ(host_cached_bytes(), before);
  host_free(q, (size_t(1) << 20) - 100);
  void* small = host_alloc(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  host_free(small, 1000);
  EXPECT_EQ(host_cached_bytes(), before + (size_t(1) << 20)) << "a small block was cached";
}

// FTZ/DAZ (core/denormals.h): the setting reaches every thread of the CPU pool (loupe's or
// OpenMP's), where a denormal then computes as zero; off again, they compute it exactly. A pool
// thread that missed it ran mnist_mlp's late epochs at half speed.
TEST(Denormals, EveryPoolThreadTakesTheSetting) {
  const int before = num_threads();
  set_num_threads(3);
  for (bool on : {true, true, false}) {  // twice on: the second finds the threads set already
    set_flush_denormals(on);
    std::mutex m;
    std::set<std::thread::id> threads;
    std::vector<int> flushes, zeroes;
    std::atomic<int> arrived{0};
    parallel_for(0, 3, 1, [&](int64_t b, int64_t e) {
      volatile float tiny = 1e-40f;  // a denormal
      const float product = tiny * 1.0f;
      // Each chunk waits (2 s at most) for the others, so that no thread runs two of them: loupe's
      // own pool lets the caller claim every chunk of a short call before a worker wakes.
      ++arrived;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (arrived.load() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      std::lock_guard<std::mutex> l(m);
      for (int64_t i = b; i < e; ++i) {
        threads.insert(std::this_thread::get_id());
        flushes.push_back(thread_flushes_denormals());
        zeroes.push_back(product == 0.f);
      }
    });
    EXPECT_EQ(threads.size(), 3u) << "every chunk on its own thread";
    EXPECT_EQ(flushes, std::vector<int>(3, on)) << "setting " << on;
    EXPECT_EQ(zeroes, std::vector<int>(3, on)) << "setting " << on;
  }
  EXPECT_FALSE(flush_denormals());
  set_num_threads(before);
}
