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

// Token sequences with IMDb's shapes: n x maxlen int32 ids, pre-padded with 0 like Keras'
// pad_sequences, each starting with the start id 1; labels 0/1.
//  - random: lengths uniform in [maxlen/2, maxlen], ids uniform in [3, vocab) (benchmarks);
//  - learnable: ids uniform in [103, vocab) except that a positive review holds 4 to 12 tokens from
//    [3, 53) and 0 to 2 from [53, 103), a negative one the reverse, at random places: a bag of
//    words (fastText) and a recurrent network (reading to the end) both learn it well above 50%.
struct SyntheticSequences {
  int64_t n_train = 0, n_test = 0;
  int maxlen = 0;
  int64_t vocab = 0;
  std::vector<int32_t> train_x, test_x;  // n x maxlen
  std::vector<uint8_t> train_y, test_y;
};
SyntheticSequences synthetic_sequences(SyntheticKind kind, int64_t n_train, int64_t n_test, int maxlen,
                                       int64_t vocab, uint64_t seed = 1);

// "random" or "learnable"; anything else is an Error naming the choices.
SyntheticKind parse_synthetic_kind(const std::string& name);

}  // namespace loupe::data
