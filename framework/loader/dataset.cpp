#include "loader/dataset.h"

#include <algorithm>

#include "core/error.h"

namespace loupe::loader {

ArrayDataset::ArrayDataset(std::vector<uint8_t> images, std::vector<uint8_t> labels, Shape sample_shape, float scale)
    : images_(std::move(images)), labels_(std::move(labels)), shape_(sample_shape),
      sample_elems_(sample_shape.numel()), scale_(scale) {
  LOUPE_CHECK(int64_t(images_.size()) == int64_t(labels_.size()) * sample_elems_, "ArrayDataset: ",
              images_.size(), " image bytes do not make ", labels_.size(), " samples of shape ", shape_.str());
}

void ArrayDataset::get(int64_t i, float* x, int32_t* y, uint64_t) const {
  LOUPE_CHECK(i >= 0 && i < size(), "sample index ", i, " is out of range for ", size(), " samples");
  const uint8_t* src = images_.data() + i * sample_elems_;
  for (int64_t k = 0; k < sample_elems_; ++k) x[k] = float(src[k]) * scale_;
  *y = int32_t(labels_[size_t(i)]);
}

FloatArrayDataset::FloatArrayDataset(std::vector<float> x, std::vector<uint8_t> labels, Shape sample_shape)
    : x_(std::move(x)), labels_(std::move(labels)), shape_(sample_shape), sample_elems_(sample_shape.numel()) {
  LOUPE_CHECK(int64_t(x_.size()) == int64_t(labels_.size()) * sample_elems_, "FloatArrayDataset: ", x_.size(),
              " values do not make ", labels_.size(), " samples of shape ", shape_.str());
}

void FloatArrayDataset::get(int64_t i, float* x, int32_t* y, uint64_t) const {
  LOUPE_CHECK(i >= 0 && i < size(), "sample index ", i, " is out of range for ", size(), " samples");
  std::copy(x_.begin() + i * sample_elems_, x_.begin() + (i + 1) * sample_elems_, x);
  *y = int32_t(labels_[size_t(i)]);
}

}  // namespace loupe::loader
