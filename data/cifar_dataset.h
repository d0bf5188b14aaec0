// CIFAR-10 as the loader sees it: 3x32x32 floats (byte / 255) and a label, optionally augmented
// like the Keras cifar10_cnn example's
//   ImageDataGenerator(width_shift_range=0.1, height_shift_range=0.1, horizontal_flip=True,
//                      fill_mode='nearest')
// as Keras 2.0-2.2 (the example's era) applied it:
//  - shift: Keras draws a real shift t ~ U(-3.2, 3.2) pixels (0.1 x 32) per axis and resamples
//    with scipy's affine_transform at order 0 (nearest neighbour), so the image moves by t rounded
//    to the nearest integer. We draw t the same way and round it: dx, dy lie in [-3, 3], with
//    P(0), P(+-1), P(+-2) = 1/6.4 each and P(+-3) = 0.7/6.4 (the ends catch only |t| in [2.5, 3.2)).
//    (keras_preprocessing >= 1.0.6 defaults to bilinear resampling instead; we keep whole pixels.)
//  - fill_mode='nearest': pixels shifted in from outside repeat the nearest edge pixel.
//  - horizontal flip with probability 0.5, applied after the shift, as in Keras.
// All of it is a pure function of get()'s `rng`, never of the thread that runs it.
#pragma once
#include <cstdint>
#include <vector>

#include "loader/dataset.h"

namespace loupe::data {

class CifarDataset : public loader::Dataset {
 public:
  // images: n x 3 x 32 x 32 bytes (CifarData's layout), labels: n bytes.
  CifarDataset(std::vector<uint8_t> images, std::vector<uint8_t> labels, bool augment);
  int64_t size() const override { return int64_t(labels_.size()); }
  Shape sample_shape() const override { return Shape{3, 32, 32}; }
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override;
  bool augment() const { return augment_; }

  // The pure transform: dst[c][y][x] = src[c][clamp(y - dy)][clamp(x' - dx)] / 255, where
  // x' = 31 - x when flipped, else x, and clamp() limits to [0, 31]. Positive dx moves the
  // picture right, positive dy down. src: 3x32x32 bytes; dst: 3x32x32 floats.
  static void augment_image(const uint8_t* src, float* dst, int dx, int dy, bool flip);
  // The random parameters for one sample, from Philox keyed by `rng` (see the top of this file).
  static void draw_augmentation(uint64_t rng, int* dx, int* dy, bool* flip);

 private:
  std::vector<uint8_t> images_, labels_;
  bool augment_;
};

}  // namespace loupe::data
