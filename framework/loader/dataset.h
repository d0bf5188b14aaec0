// Data sets as the loader sees them: a size, the shape of one sample, and a way to write sample i
// (as float, normalised and augmented) and its label into a batch buffer.
#pragma once
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace loupe::loader {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;
  // Writes sample i to x (sample_shape().numel() floats) and its label to *y. `rng` is a
  // per-(seed, epoch, sample) number for augmentation, so results never depend on which worker
  // ran them. Called from worker threads concurrently: must not modify shared state.
  virtual void get(int64_t i, float* x, int32_t* y, uint64_t rng) const = 0;
};

// Images stored as uint8 (n x sample shape) with uint8 labels, scaled to floats by `scale`.
class ArrayDataset : public Dataset {
 public:
  ArrayDataset(std::vector<uint8_t> images, std::vector<uint8_t> labels, Shape sample_shape,
               float scale = 1.0f / 255.0f);
  int64_t size() const override { return int64_t(labels_.size()); }
  Shape sample_shape() const override { return shape_; }
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override;

 private:
  std::vector<uint8_t> images_, labels_;
  Shape shape_;
  int64_t sample_elems_;
  float scale_;
};

// Samples stored as float32 (n x sample shape), used as they are, with int32 labels: a model file's
// NumPy arrays (data/npy.h's load_npy_features).
class FloatArrayDataset : public Dataset {
 public:
  FloatArrayDataset(std::vector<float> x, std::vector<uint8_t> labels, Shape sample_shape);
  int64_t size() const override { return int64_t(labels_.size()); }
  Shape sample_shape() const override { return shape_; }
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override;

 private:
  std::vector<float> x_;
  std::vector<uint8_t> labels_;
  Shape shape_;
  int64_t sample_elems_;
};

}  // namespace loupe::loader
