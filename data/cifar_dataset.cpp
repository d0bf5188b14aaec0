#include "data/cifar_dataset.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/philox.h"

namespace loupe::data {
namespace {

constexpr int kSide = 32, kPlane = kSide * kSide, kImage = 3 * kPlane;
constexpr float kScale = 1.0f / 255.0f;  // as ArrayDataset, so both give identical floats
constexpr double kMaxShift = 0.1 * kSide;  // Keras: width_shift_range * width = 3.2 pixels

int clamp_px(int v) { return std::min(std::max(v, 0), kSide - 1); }

// A whole-pixel shift from one random word: t ~ U(-3.2, 3.2) rounded to the nearest integer.
// (w + 0.5) / 2^32 lies strictly inside (0, 1) and is symmetric about 1/2, so t is symmetric too.
int shift_from(uint32_t w) {
  const double u = (double(w) + 0.5) / 4294967296.0;
  return int(std::floor((2.0 * u - 1.0) * kMaxShift + 0.5));
}

}  // namespace

CifarDataset::CifarDataset(std::vector<uint8_t> images, std::vector<uint8_t> labels, bool augment)
    : images_(std::move(images)), labels_(std::move(labels)), augment_(augment) {
  if (images_.size() != labels_.size() * kImage)
    throw Error("CifarDataset: " + std::to_string(images_.size()) + " image bytes do not make " +
                std::to_string(labels_.size()) + " images of 3x32x32 = 3072 bytes; pass the "
                "images and labels of one split of load_cifar10()'s result");
  for (size_t k = 0; k < labels_.size(); ++k)
    if (labels_[k] > 9)
      throw Error("CifarDataset: label " + std::to_string(labels_[k]) + " at index " +
                  std::to_string(k) + " is out of range; CIFAR-10 labels are 0 to 9");
}

void CifarDataset::draw_augmentation(uint64_t rng, int* dx, int* dy, bool* flip) {
  const Philox4 r = philox(rng, 0, 0xC1FA10u);  // keyed by rng: a pure function of it
  *dx = shift_from(r.v[0]);
  *dy = shift_from(r.v[1]);
  *flip = (r.v[2] >> 31) != 0;  // probability exactly 1/2
}

void CifarDataset::augment_image(const uint8_t* src, float* dst, int dx, int dy, bool flip) {
  int col[kSide];  // source column of each destination column
  for (int x = 0; x < kSide; ++x) col[x] = clamp_px((flip ? kSide - 1 - x : x) - dx);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < kSide; ++y) {
      const uint8_t* row = src + c * kPlane + clamp_px(y - dy) * kSide;
      float* out = dst + c * kPlane + y * kSide;
      for (int x = 0; x < kSide; ++x) out[x] = float(row[col[x]]) * kScale;
    }
}

void CifarDataset::get(int64_t i, float* x, int32_t* y, uint64_t rng) const {
  if (i < 0 || i >= size())
    throw Error("CifarDataset: sample index " + std::to_string(i) + " is out of range for " +
                std::to_string(size()) + " samples");
  const uint8_t* src = images_.data() + i * kImage;
  if (augment_) {
    int dx, dy;
    bool flip;
    draw_augmentation(rng, &dx, &dy, &flip);
    augment_image(src, x, dx, dy, flip);
  } else {
    for (int k = 0; k < kImage; ++k) x[k] = float(src[k]) * kScale;
  }
  *y = int32_t(labels_[size_t(i)]);
}

}  // namespace loupe::data
