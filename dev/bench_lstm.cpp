// Host and device cost of one LSTM forward + backward on the GPU, at the reference models' shapes:
// the time until the calls return (host issue time) and until the GPU finishes (wall), each the
// median of the iterations, with the GPU drained before each one. LOUPE_LSTM_ALGO and
// LOUPE_LSTM_LAYOUT (ops/lstm/lstm_cuda.cu) select how cuDNN is called.
//   bench_lstm [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/knobs.h"
#include "loupe.h"

using namespace loupe;

namespace {
struct Shape4 {
  const char* name;
  int64_t N, T, I, H;
  bool bidirectional;
};

Tensor random(const Shape& s, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(size_t(s.numel()));
  for (float& x : v) x = u(rng);
  return from_vector(v, s, kCUDA);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::puts("bench_lstm: no CUDA device");
    return 0;
  }
  int iters = argc > 1 ? std::atoi(argv[1]) : 30;
  const std::string algo = knobs::choice("LOUPE_LSTM_ALGO").value_or("standard");
  const std::string layout = knobs::choice("LOUPE_LSTM_LAYOUT").value_or("batch");
  std::printf("LSTM forward + backward on %s, algo %s, layout %s (median of %d)\n",
              cuda_runtime()->device_name().c_str(), algo.c_str(), layout.c_str(), iters);
  const Shape4 shapes[] = {{"imdb_bilstm  N=32   T=100 I=128 H=64 bi", 32, 100, 128, 64, true},
                           {"imdb_bilstm  N=1024 T=100 I=128 H=64 bi", 1024, 100, 128, 64, true},
                           {"char_lstm    N=128  T=40  I=57  H=128", 128, 40, 57, 128, false},
                           {"char_lstm    N=1024 T=40  I=57  H=128", 1024, 40, 57, 128, false}};
  std::mt19937 rng(1);
  for (const Shape4& s : shapes) {
    LstmParams p;
    p.input_size = s.I;
    p.hidden_size = s.H;
    p.bidirectional = s.bidirectional;
    Tensor x = random(Shape{s.N, s.T, s.I}, 1.f, rng).requires_grad_(true);
    Tensor w = random(Shape{lstm_weight_count(p)}, 0.1f, rng).requires_grad_(true);
    std::vector<double> host, wall;
    for (int i = 0; i < iters + 3; ++i) {
      cuda_runtime()->synchronize();
      auto t0 = std::chrono::steady_clock::now();
      LstmResult r = lstm(x, w, p, true);
      // The models read the final h (imdb_bilstm) or the last step of y (char_lstm).
      backward(s.bidirectional ? sum(r.h) : sum(r.y));
      auto t1 = std::chrono::steady_clock::now();
      cuda_runtime()->synchronize();
      auto t2 = std::chrono::steady_clock::now();
      if (i < 3) continue;  // plans, pool growth
      host.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      wall.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    }
    std::printf("  %-40s host %7.3f ms   wall %7.3f ms\n", s.name, median(host), median(wall));
  }
  return 0;
}
