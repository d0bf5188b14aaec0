#include "data/synthetic.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace loupe::data {

namespace {
// Uniform in [0, 1) from (seed, counter, stream).
double uniform(uint64_t seed, uint64_t counter, uint64_t stream) {
  return double(philox(seed, counter, stream).v[0]) / 4294967296.0;
}

void random_set(std::vector<uint8_t>& images, std::vector<uint8_t>& labels, int64_t n, int64_t elems, int classes,
                uint64_t seed, uint64_t stream) {
  images.resize(size_t(n * elems));
  labels.resize(size_t(n));
  for (int64_t i = 0; i < n * elems; i += 4) {
    Philox4 p = philox(seed, uint64_t(i / 4), stream);
    for (int k = 0; k < 4 && i + k < n * elems; ++k) images[size_t(i + k)] = uint8_t(p.v[k] % 256);
  }
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = uint8_t(philox(seed, uint64_t(i), stream + 1).v[0] % classes);
}

// Class templates in [-1, 1]: per channel, the sum of three waves sin(fx x + fy y + phase) with
// frequencies of 1 to 3 cycles across the image.
std::vector<float> templates(int classes, int64_t C, int64_t H, int64_t W, uint64_t seed) {
  std::vector<float> t(size_t(classes * C * H * W));
  const double two_pi = 6.283185307179586;
  for (int k = 0; k < classes; ++k)
    for (int64_t c = 0; c < C; ++c) {
      double fx[3], fy[3], ph[3];
      for (int w = 0; w < 3; ++w) {
        uint64_t ctr = uint64_t(((k * C + c) * 3 + w) * 3);
        fx[w] = (1 + 2 * uniform(seed, ctr, 11)) * (uniform(seed, ctr, 12) < 0.5 ? -1 : 1);
        fy[w] = (1 + 2 * uniform(seed, ctr + 1, 11)) * (uniform(seed, ctr + 1, 12) < 0.5 ? -1 : 1);
        ph[w] = two_pi * uniform(seed, ctr + 2, 11);
      }
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          double v = 0;
          for (int w = 0; w < 3; ++w) v += std::sin(two_pi * (fx[w] * double(x) / W + fy[w] * double(y) / H) + ph[w]);
          t[size_t(((k * C + c) * H + y) * W + x)] = float(v / 3);
        }
    }
  return t;
}

void learnable_set(std::vector<uint8_t>& images, std::vector<uint8_t>& labels, int64_t n, const std::vector<float>& t,
                   int64_t C, int64_t H, int64_t W, int classes, uint64_t seed, uint64_t stream) {
  const int64_t elems = C * H * W;
  images.resize(size_t(n * elems));
  labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    Philox4 p = philox(seed, uint64_t(i), stream);
    int k = int(p.v[0] % uint32_t(classes));
    labels[size_t(i)] = uint8_t(k);
    int64_t dx = int64_t(p.v[1] % 9) - 4, dy = int64_t(p.v[2] % 9) - 4;
    double contrast = 50 + 60 * (double(p.v[3]) / 4294967296.0);  // template amplitude in grey levels
    const float* tk = t.data() + size_t(k) * size_t(elems);
    uint8_t* out = images.data() + size_t(i * elems);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          int64_t sy = ((y - dy) % H + H) % H, sx = ((x - dx) % W + W) % W;
          int64_t e = (c * H + y) * W + x;
          double noise = 40 * (uniform(seed, uint64_t(i * elems + e), stream + 1) - 0.5);
          double v = 128 + contrast * tk[(c * H + sy) * W + sx] + noise;
          out[e] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
        }
  }
}
}  // namespace

SyntheticKind parse_synthetic_kind(const std::string& name) {
  if (name == "random") return SyntheticKind::Random;
  if (name == "learnable") return SyntheticKind::Learnable;
  throw Error("--synthetic: unknown kind '" + name + "'; the choices are random (the default) and learnable");
}

SyntheticImages synthetic_images(SyntheticKind kind, const Shape& sample, int64_t n_train, int64_t n_test,
                                 int classes, uint64_t seed) {
  LOUPE_CHECK(sample.size() == 2 || sample.size() == 3, "synthetic images need a [H, W] or [C, H, W] sample shape");
  LOUPE_CHECK(classes >= 2 && classes <= 256, "synthetic images: 2 to 256 classes");
  int64_t C = sample.size() == 3 ? sample[0] : 1, H = sample[sample.size() - 2], W = sample[sample.size() - 1];
  SyntheticImages s;
  s.sample = sample;
  s.n_train = n_train;
  s.n_test = n_test;
  if (kind == SyntheticKind::Random) {
    random_set(s.train_images, s.train_labels, n_train, C * H * W, classes, seed, 1);
    random_set(s.test_images, s.test_labels, n_test, C * H * W, classes, seed, 3);
  } else {
    std::vector<float> t = templates(classes, C, H, W, seed);
    learnable_set(s.train_images, s.train_labels, n_train, t, C, H, W, classes, seed, 21);
    learnable_set(s.test_images, s.test_labels, n_test, t, C, H, W, classes, seed, 23);
  }
  return s;
}

namespace {
void sequence_set(SyntheticKind kind, std::vector<int32_t>& x, std::vector<uint8_t>& y, int64_t n, int maxlen,
                  int64_t vocab, uint64_t seed, uint64_t stream) {
  x.assign(size_t(n * maxlen), 0);
  y.resize(size_t(n));
  const bool learn = kind == SyntheticKind::Learnable;
  const int64_t lo = learn ? 103 : 3;
  LOUPE_CHECK(vocab > lo + 1, "synthetic sequences need a vocabulary above ", lo + 1, " ids");
  for (int64_t i = 0; i < n; ++i) {
    Philox4 p = philox(seed, uint64_t(i), stream);
    int label = int(p.v[0] & 1);
    y[size_t(i)] = uint8_t(label);
    int len = maxlen / 2 + int(p.v[1] % uint32_t(maxlen - maxlen / 2 + 1));
    int32_t* row = x.data() + size_t(i * maxlen) + (maxlen - len);  // pre-padding: the review sits at the end
    uint64_t ctr = uint64_t(i) * uint64_t(maxlen + 32);
    row[0] = 1;  // the start id
    for (int t = 1; t < len; ++t)
      row[t] = int32_t(lo + int64_t(philox(seed, ctr + uint64_t(t), stream + 1).v[0] % uint64_t(vocab - lo)));
    if (!learn || len < 2) continue;
    int strong = 4 + int(p.v[2] % 9), weak = int(p.v[3] % 3);
    for (int k = 0; k < strong + weak; ++k) {
      Philox4 q = philox(seed, ctr + uint64_t(maxlen + k), stream + 2);
      int t = 1 + int(q.v[0] % uint32_t(len - 1));
      bool positive_word = (k < strong) == (label == 1);
      row[t] = int32_t((positive_word ? 3 : 53) + int(q.v[1] % 50));
    }
  }
}
}  // namespace

SyntheticSequences synthetic_sequences(SyntheticKind kind, int64_t n_train, int64_t n_test, int maxlen,
                                       int64_t vocab, uint64_t seed) {
  LOUPE_CHECK(maxlen >= 2, "synthetic sequences need maxlen >= 2");
  SyntheticSequences s;
  s.n_train = n_train;
  s.n_test = n_test;
  s.maxlen = maxlen;
  s.vocab = vocab;
  sequence_set(kind, s.train_x, s.train_y, n_train, maxlen, vocab, seed, 31);
  sequence_set(kind, s.test_x, s.test_y, n_test, maxlen, vocab, seed, 35);
  return s;
}

}  // namespace loupe::data
