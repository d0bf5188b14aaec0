// Embedding lookup, nn::Embedding and cat: hand-checked values and gradients, the float-ids path,
// the CPU's id checks, and (with a GPU) a deterministic CUDA backward. The op table
// (op_cases.h) gradchecks both ops and compares them CPU vs CUDA on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "loupe.h"
#include "skip.h"

using namespace loupe;

namespace {

Tensor random_tensor(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  std::vector<double> v(static_cast<size_t>(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) - 0.5;
  return to(from_vector(v, s), dt);
}

// The message of the Error f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Embedding, FloatIdsGiveTheSameRowsAndGradientsAsInt32) {
  std::vector<int32_t> ids{3, 0, 9, 3, 5, 1};
  Tensor ii = from_vector(ids, Shape{2, 3});
  Tensor w0 = random_tensor(Shape{10, 4}, 1, DType::f64);
  Tensor gy = random_tensor(Shape{2, 3, 4}, 2, DType::f64);
  std::vector<double> ref_y, ref_g;
  for (DType t : {DType::i32, DType::f32, DType::f64}) {
    Tensor w = clone(w0).detach();
    w.requires_grad_(true);
    Tensor y = embedding(to(ii, t), w);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(y.dtype(), DType::f64);
    backward(y, gy);
    if (t == DType::i32) {
      ref_y = y.to_vector<double>();
      ref_g = w.grad().to_vector<double>();
      continue;
    }
    EXPECT_EQ(y.to_vector<double>(), ref_y) << dtype_name(t);
    EXPECT_EQ(w.grad().to_vector<double>(), ref_g) << dtype_name(t);
  }
  // Row 9 of the table is output row [0, 2].
  std::vector<double> wv = w0.to_vector<double>();
  for (int j = 0; j < 4; ++j) EXPECT_EQ(ref_y[size_t(2 * 4 + j)], wv[size_t(9 * 4 + j)]);
}

TEST(Embedding, BadIdsThrowOnTheCpuNamingTheValue) {
  Tensor w = random_tensor(Shape{6, 3}, 3);
  std::string m = error_of([&] { embedding(from_vector(std::vector<int32_t>{1, 2, 3, 6}, Shape{2, 2}), w); });
  EXPECT_NE(m.find("id 6 at position [1, 1]"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 6)"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<int32_t>{-1, 2}, Shape{2}), w); });
  EXPECT_NE(m.find("id -1 at position [0]"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<float>{0, 2.5f, 1}, Shape{3}), w); });
  EXPECT_NE(m.find("id 2.5 at position [1]"), std::string::npos) << m;
  EXPECT_NE(m.find("not an integer"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<double>{0, 1, 7}, Shape{3}), w); });
  EXPECT_NE(m.find("id 7 at position [2]"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<float>{std::nanf("")}, Shape{1}), w); });
  EXPECT_NE(m.find("id nan"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<uint8_t>{1}, Shape{1}), w); });
  EXPECT_NE(m.find("uint8"), std::string::npos) << m;
  m = error_of([&] { embedding(from_vector(std::vector<int32_t>{1}, Shape{1}), random_tensor(Shape{6}, 4)); });
  EXPECT_NE(m.find("weight [V, E]"), std::string::npos) << m;
}

// one_hot is the rows of an identity without the identity (char_lstm's input): the same values as
// the embedding lookup into one, for int32 and float ids, and the embedding's id checks.
TEST(OneHot, RowsOfAnIdentityWithoutOne) {
  const int64_t C = 7;
  std::vector<float> eye(size_t(C * C), 0.f);
  for (int64_t i = 0; i < C; ++i) eye[size_t(i * C + i)] = 1.f;
  std::vector<int32_t> ids{3, 0, 6, 3, 5, 1};
  Tensor expect = embedding(from_vector(ids, Shape{2, 3}), from_vector(eye, Shape{C, C}));
  Tensor y = one_hot(from_vector(ids, Shape{2, 3}), C);
  EXPECT_EQ(y.shape(), (Shape{2, 3, C}));
  EXPECT_EQ(y.to_vector<float>(), expect.to_vector<float>());
  EXPECT_EQ(one_hot(to(from_vector(ids, Shape{6}), DType::f32), C, DType::f64).to_vector<double>(),
            expect.to_vector<double>());
  std::string m = error_of([&] { one_hot(from_vector(std::vector<int32_t>{1, 7}, Shape{2}), C); });
  EXPECT_NE(m.find("id 7 at position [1]"), std::string::npos) << m;
  m = error_of([&] { one_hot(from_vector(std::vector<int32_t>{1}, Shape{1}), 0); });
  EXPECT_NE(m.find("at least one class"), std::string::npos) << m;
}

TEST(Embedding, RepeatedIdsAccumulateInTheGradient) {
  int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor w = zeros(Shape{4, 2}, DType::f64);
    w.requires_grad_(true);
    Tensor y = embedding(from_vector(std::vector<int32_t>{0, 2, 0, 0, 3}, Shape{5}), w);
    backward(y, from_vector(std::vector<double>{1, 2, 10, 20, 100, 200, 1000, 2000, 0.5, 0.25}, Shape{5, 2}));
    // Row 0 collects positions 0, 2 and 3; row 1 none; row 2 position 1; row 3 position 4.
    std::vector<double> want{1 + 100 + 1000, 2 + 200 + 2000, 0, 0, 10, 20, 0.5, 0.25};
    EXPECT_EQ(w.grad().to_vector<double>(), want) << threads << " threads";
  }
  set_num_threads(saved);
}

// A weight that already has a .grad (a parameter's slice of the gradient arena, or an earlier
// backward) gets the new gradient added in place, on the selected rows only.
TEST(Embedding, GradientAddsIntoAnExistingGrad) {
  nn::Embedding m(4, 2);
  Tensor ids = from_vector(std::vector<int32_t>{0, 2, 0}, Shape{3});
  Tensor gy = from_vector(std::vector<float>{1, 2, 10, 20, 100, 200}, Shape{3, 2});
  m.arena();  // built on first use: the parameters become views into it
  Tensor w = m.weight;
  ASSERT_TRUE(w.grad().defined()) << "a module parameter's .grad is its arena slice";
  fill_(w.grad(), 0.5);
  backward(m(ids), gy);
  std::vector<float> want{101.5f, 202.5f, 0.5f, 0.5f, 10.5f, 20.5f, 0.5f, 0.5f};
  EXPECT_EQ(w.grad().to_vector<float>(), want);
  std::vector<float> arena = m.arena().grads().to_vector<float>();  // padded past the weight
  EXPECT_EQ(std::vector<float>(arena.begin(), arena.begin() + 8), want) << "the arena holds the same gradient";
}

// The gradient as mean(embedding(ids), 1) gives it ([N, T, E], stride 0 along T) and in other
// strided layouts is read in place or copied; either way the sums are those of the same gradient
// made contiguous first, bit for bit (the CPU adds each row's positions in the same order).
TEST(Embedding, StridedGradientsGiveTheContiguousResult) {
  const int64_t N = 3, T = 7, E = 5;
  std::vector<int32_t> ids(N * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(philox(41, i, 0).v[0] % 4);  // rows 0..3 of 6
  Tensor idt = from_vector(ids, Shape{N, T});
  Tensor w0 = random_tensor(Shape{6, E}, 42, DType::f64);
  auto grad_of = [&](const Tensor& gy) {
    Tensor w = clone(w0).detach();
    w.requires_grad_(true);
    backward(embedding(idt, w), gy);
    return w.grad().to_vector<double>();
  };
  Tensor g = random_tensor(Shape{N, 1, E}, 43, DType::f64);
  Tensor gtn = random_tensor(Shape{T, N, E}, 44, DType::f64), gen = random_tensor(Shape{E, N, T}, 45, DType::f64);
  std::vector<Tensor> views{
      g.expand(Shape{N, T, E}),              // stride 0 along T: read in place
      transpose(gtn, 0, 1),                   // [N, T, E] strides (E, N E, 1): read in place
      transpose(transpose(gen, 0, 2), 0, 1)};  // columns not contiguous: copied
  for (size_t k = 0; k < views.size(); ++k) {
    ASSERT_FALSE(views[k].is_contiguous()) << k;
    EXPECT_EQ(grad_of(views[k]), grad_of(contiguous(views[k]))) << "layout " << k;
  }
  // Three position dimensions that do not nest: copied, same result.
  Tensor ids3d = from_vector(std::vector<int32_t>(ids.begin(), ids.begin() + 12), Shape{2, 3, 2});
  Tensor g4 = transpose(random_tensor(Shape{2, 2, 3, E}, 46, DType::f64), 1, 2);  // [2, 3, 2, E]
  Tensor w1 = clone(w0).detach().requires_grad_(true), w2 = clone(w0).detach().requires_grad_(true);
  backward(embedding(ids3d, w1), g4);
  backward(embedding(ids3d, w2), contiguous(g4));
  EXPECT_EQ(w1.grad().to_vector<double>(), w2.grad().to_vector<double>());
  // mean over positions: the gradient of each selected row is (its count / T) times g's row.
  Tensor w = clone(w0).detach().requires_grad_(true);
  Tensor gm = random_tensor(Shape{N, E}, 47, DType::f64);
  backward(mean(embedding(idt, w), 1), gm);
  std::vector<double> got = w.grad().to_vector<double>(), gv = gm.to_vector<double>(), want(got.size(), 0.0);
  for (int64_t i = 0; i < N * T; ++i)
    for (int64_t j = 0; j < E; ++j) want[size_t(ids[size_t(i)] * E + j)] += gv[size_t(i / T * E + j)] / double(T);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(Embedding, ModuleInitIsKerasUniformAndSeeded) {
  manual_seed(11);
  nn::Embedding a(50, 16);
  manual_seed(11);
  nn::Embedding b(50, 16);
  nn::Embedding c(50, 16);  // the next draw from the same seed
  EXPECT_EQ(a.num_parameters(), 50 * 16);
  EXPECT_EQ(a.type_name(), "Embedding(50, 16)");
  ASSERT_EQ(a.weight.shape(), (Shape{50, 16}));
  std::vector<float> va = a.weight.to_vector<float>(), vb = b.weight.to_vector<float>();
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, c.weight.to_vector<float>());
  double mean = 0;
  for (float v : va) {
    EXPECT_GE(v, -0.05f);
    EXPECT_LE(v, 0.05f);
    mean += v / double(va.size());
  }
  EXPECT_LT(std::abs(mean), 0.005);  // U(-0.05, 0.05) over 800 draws: sd of the mean ~0.001
  Tensor y = a(from_vector(std::vector<float>{1, 2, 3, 4, 5, 49}, Shape{2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 16}));
  backward(sum(y));
  EXPECT_EQ(a.weight.grad().shape(), (Shape{50, 16}));
}

TEST(Cat, ValuesAndGradientsOnAHandExample) {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, Shape{2, 2});
  Tensor b = from_vector(std::vector<double>{5, 6}, Shape{2, 1});
  a.requires_grad_(true);
  b.requires_grad_(true);
  Tensor y = cat({a, b}, 1);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 5, 3, 4, 6}));
  backward(y, from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{3, 6}));

  // Along dimension 0, three inputs, one of which needs no gradient.
  Tensor c = from_vector(std::vector<double>{7, 8}, Shape{1, 2});
  Tensor a2 = a.detach();
  a2.requires_grad_(true);
  Tensor z = cat({a2, c, a2}, 0);
  EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 7, 8, 1, 2, 3, 4}));
  backward(z, from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Shape{5, 2}));
  EXPECT_EQ(a2.grad().to_vector<double>(), (std::vector<double>{1 + 7, 2 + 8, 3 + 9, 4 + 10}));
  EXPECT_FALSE(c.grad().defined());
}

TEST(Cat, ErrorsNameTheShapes) {
  Tensor a = zeros(Shape{2, 3}), b = zeros(Shape{3, 3});
  std::string m = error_of([&] { cat({a, b}, 1); });
  EXPECT_NE(m.find("[3, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_EQ(cat({a, b}, 0).shape(), (Shape{5, 3}));
  EXPECT_NE(error_of([&] { cat({a, zeros(Shape{2, 3}, DType::f64)}, 0); }).find("float64"), std::string::npos);
  EXPECT_NE(error_of([&] { cat({}, 0); }), "");
}

TEST(EmbeddingCuda, DeterministicBackwardMatchesTheCpu) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  const int64_t V = 50;
  // E = 64, 50 and 51 move rows as float4, float2 and float (50 and 51 leave a partial last column
  // group); the long run spans many chunks of the backward.
  for (int64_t E : {int64_t(64), int64_t(50), int64_t(51)}) {
    SCOPED_TRACE("E = " + std::to_string(E));
    std::vector<int32_t> ids(64 * 400);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(philox(21, i, 0).v[0] % uint32_t(V));
    for (size_t i = 1000; i < 9000; ++i) ids[i] = 0;  // a long run, like the padding id of a text batch
    Tensor idt = from_vector(ids, Shape{64, 400});
    Tensor w0 = random_tensor(Shape{V, E}, 22), gy = random_tensor(Shape{64, 400, E}, 23);
    // The gradient of w (as doubles) on device d, from ids of type ids_dtype and a table of type wdt.
    auto run = [&](Device d, DType ids_dtype, DType wdt, std::vector<double>* y) {
      Tensor w = to(to(w0, wdt), d).detach();
      w.requires_grad_(true);
      Tensor out = embedding(to(to(idt, ids_dtype), d), w);
      if (y) *y = out.to_vector<double>();
      backward(out, to(to(gy, wdt), d));
      return w.grad().to_vector<double>();
    };
    std::vector<double> y_cpu, y_gpu;
    run(kCPU, DType::i32, DType::f32, &y_cpu);
    std::vector<double> ref = run(kCPU, DType::i32, DType::f64, nullptr);  // float64 sums: the reference
    std::vector<double> g1 = run(kCUDA, DType::i32, DType::f32, &y_gpu), g2 = run(kCUDA, DType::i32, DType::f32, nullptr);
    EXPECT_EQ(y_cpu, y_gpu);  // a gather: exact
    ASSERT_EQ(ref.size(), g1.size());
    // Row 0 sums about 8,500 rows (|sum| up to ~30), so the bound is relative there.
    for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(ref[i], g1[i], 1e-4 * (1 + std::abs(ref[i]))) << i;
    EXPECT_EQ(g1, g2) << "the CUDA embedding backward is not bit-reproducible";
    EXPECT_EQ(run(kCUDA, DType::f32, DType::f32, nullptr), g1) << "float ids on CUDA";
    // A second backward adds in place into the .grad the first one left: exactly twice.
    Tensor w = to(w0, kCUDA).detach().requires_grad_(true);
    for (int k = 0; k < 2; ++k) backward(embedding(to(idt, kCUDA), w), to(gy, kCUDA));
    std::vector<double> twice = w.grad().to_vector<double>();
    for (size_t i = 0; i < g1.size(); ++i) ASSERT_EQ(twice[i], 2 * g1[i]) << i;
  }
  // Ids that select no row give a zero row and no gradient on CUDA rather than a fault; 100 of them
  // make their run (sorted last) one of several chunks, which the backward skips.
  const int64_t E = 64;
  Tensor w0 = random_tensor(Shape{V, E}, 22);
  std::vector<float> bv{1, -1, 50, 2.5f, 3};
  bv.resize(105, -7.f);
  Tensor bad = to(from_vector(bv, Shape{105}), kCUDA);
  Tensor w = to(w0, kCUDA).detach();
  w.requires_grad_(true);
  Tensor out = embedding(bad, w);
  std::vector<float> y = out.to_vector<float>(), wv = w0.to_vector<float>();
  for (int64_t j = 0; j < E; ++j) {
    EXPECT_EQ(y[size_t(j)], wv[size_t(1 * E + j)]);
    EXPECT_EQ(y[size_t(4 * E + j)], wv[size_t(3 * E + j)]);
    for (int64_t r : {1, 2, 3, 104}) EXPECT_EQ(y[size_t(r * E + j)], 0.f) << "row " << r;
  }
  backward(sum(out));
  std::vector<float> g = w.grad().to_vector<float>();
  for (int64_t v = 0; v < V; ++v)
    for (int64_t j = 0; j < E; ++j) ASSERT_EQ(g[size_t(v * E + j)], v == 1 || v == 3 ? 1.f : 0.f) << v << " " << j;
}

// imdb_fasttext's backward at its size: ids [1024, 400] over a 1.2M-row table, a quarter of them the
// padding id 0 (one run of ~100k positions, thousands of chunks), the others skewed towards small
// ids so that many repeat (runs of every length); float32 gradients both dense and as
// mean(..., 1) gives them ([N, T, E] with stride 0 along T, read in place). CUDA against float64
// sums on the CPU, and bit-identical from run to run.
TEST(EmbeddingCuda, OneHotMatchesTheCpu) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  const int64_t C = 57;
  std::vector<int32_t> ids(128 * 40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(philox(5, i, 0).v[0] % uint32_t(C));
  Tensor cpu = one_hot(from_vector(ids, Shape{128, 40}), C);
  for (DType idt : {DType::i32, DType::f32, DType::f64})
    for (DType out : {DType::f32, DType::f16, DType::bf16}) {
      Tensor g = one_hot(to(to(from_vector(ids, Shape{128, 40}), idt), kCUDA), C, out);
      EXPECT_EQ(g.dtype(), out);
      EXPECT_EQ(to(g, DType::f32).to_vector<float>(), cpu.to_vector<float>()) << dtype_name(idt) << " ids";
    }
  // An id outside [0, C) gives a row of zeros on CUDA (no wait for the device to check it).
  std::vector<float> z = one_hot(to(from_vector(std::vector<int32_t>{2, -1, 57}, Shape{3}), kCUDA), C).to_vector<float>();
  float total = 0;
  for (float v : z) total += v;
  EXPECT_EQ(total, 1.f);
  EXPECT_EQ(z[2], 1.f);
}

TEST(EmbeddingCuda, FastTextScaleBackwardMatchesTheCpuAndRepeats) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  const int64_t N = 1024, T = 400, V = 1200000, E = 50;
  std::vector<int32_t> ids(size_t(N * T));
  for (int64_t b = 0; b < N; ++b) {
    int64_t len = 200 + int64_t(philox(31, uint64_t(b), 0).v[0] % 200);  // then padding: 25 % on average
    for (int64_t t = 0; t < T; ++t) {
      double u = philox_uniform(32, 0, uint64_t(b * T + t));
      ids[size_t(b * T + t)] = t < len ? 1 + int32_t(u * u * u * double(V - 1)) : 0;
    }
  }
  Tensor idt = from_vector(ids, Shape{N, T});
  Tensor w0 = random_tensor(Shape{V, E}, 33);
  Tensor gy = random_tensor(Shape{N, T, E}, 34), gm = random_tensor(Shape{N, E}, 35);
  // The gradient of w (as doubles) on device d with a table of type wdt, through the mean or not;
  // `twice` runs the backward a second time into the same .grad.
  auto run = [&](Device d, DType wdt, bool through_mean, bool twice = false) {
    Tensor w = to(to(w0, wdt), d).detach();
    w.requires_grad_(true);
    for (int k = 0; k < (twice ? 2 : 1); ++k) {
      Tensor y = embedding(to(idt, d), w);
      if (through_mean) backward(mean(y, 1), to(to(gm, wdt), d));
      else backward(y, to(to(gy, wdt), d));
    }
    return w.grad().to_vector<double>();
  };
  for (bool through_mean : {false, true}) {
    SCOPED_TRACE(through_mean ? "mean over positions" : "dense gradient");
    std::vector<double> ref = run(kCPU, DType::f64, through_mean);
    std::vector<double> g1 = run(kCUDA, DType::f32, through_mean), g2 = run(kCUDA, DType::f32, through_mean);
    ASSERT_EQ(ref.size(), g1.size());
    // Row 0 sums ~100k rows, so the bound is relative there (as in the test above).
    for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(ref[i], g1[i], 1e-4 * (1 + std::abs(ref[i]))) << i;
    EXPECT_TRUE(g1 == g2) << "the CUDA embedding backward is not bit-reproducible";
    std::vector<double> acc = run(kCUDA, DType::f32, through_mean, true);
    for (size_t i = 0; i < g1.size(); ++i) ASSERT_EQ(acc[i], 2 * g1[i]) << "added into .grad, element " << i;
  }
}
