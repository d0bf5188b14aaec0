// Synthetic image sets with the real shapes, generated from Philox (the same on every machine):
//  - random: uniform bytes and uniform labels, nothing to learn (for benchmarks, where the content
//    does not matter);
//  - learnable: each class has a smooth template (a few random low-frequency waves per channel);
//    a sample is its class's template at a random contrast, shifted by up to +-4 pixels (with
//    wrap-around), plus per-pixel noise. A CNN that learns separates the classes well above
//    chance within an epoch or two; one that does not stays at 1/classes. Tests and the mixed-
//    precision comparisons use it where the real data set cannot be downloaded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace loupe::data {

struct SyntheticImages {
  Shape sample;  // [C, H, W], or [H, W] for one channel
  int64_t n_train = 0, n_test = 0;
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;
};

enum class SyntheticKind { Random, Learnable };

// `sample` is [H, W] (grey) or [C, H, W]; labels in [0, classes).
SyntheticImages synthetic_images(SyntheticKind kind, const Shape& sample, int64_t n_train, int64_t n_test,
                                 int classes = 10, uint64_t seed = 1);

// "random" or "learnable"; anything else is an Error naming the choices.
SyntheticKind parse_synthetic_kind(const std::string& name);

}  // namespace loupe::data
