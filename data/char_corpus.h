// A character corpus for char_lstm, prepared as Keras' examples/lstm_text_generation.py does it:
// the whole text lower-cased, its distinct characters sorted into a vocabulary, and windows of 40
// characters every 3 characters, each predicting the character that follows it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/dataset.h"

namespace loupe::data {

class CharCorpus {
 public:
  // Decodes UTF-8 into code points (strictly: an invalid sequence, overlong form, surrogate or a
  // code point above U+10FFFF is a loupe::Error giving its byte offset) and lower-cases ASCII
  // letters. Other code points stay as they are, where Python's str.lower() would also lower-case
  // "É"; English prose has few, and the vocabulary is simply a little larger. Line ends stay as
  // they are too (Python's text mode would turn "\r\n" into "\n").
  static CharCorpus from_text(std::string_view utf8);
  // The same for a file; errors (missing, unreadable, empty, over 64 MiB, refused before it is
  // read; invalid UTF-8) name the path.
  static CharCorpus from_file(const std::string& path);

  const std::vector<char32_t>& chars() const { return chars_; }  // sorted distinct code points
  const std::vector<int32_t>& ids() const { return ids_; }       // the text, ids_[k] = index in chars()
  int64_t length() const { return int64_t(ids_.size()); }        // in code points
  int vocab_size() const { return int(chars_.size()); }
  int32_t id(char32_t c) const;  // -1 when c is not in the corpus

  // Keras: for i in range(0, len(text) - window, step): text[i:i+window] predicts text[i+window].
  // So the count of i = 0, step, 2 step, ... with i + window < length().
  int64_t num_windows(int window = 40, int step = 3) const;
  // The ids of window k (text[k*step : k*step+window]) and of the character it predicts.
  std::vector<int32_t> window(int64_t k, int window = 40, int step = 3) const;
  int32_t target(int64_t k, int window = 40, int step = 3) const;

  // Ids back to UTF-8 text; an id outside [0, vocab_size()) is an Error.
  std::string decode(const std::vector<int32_t>& ids) const;
  // UTF-8 text (a seed for sampling) to ids, lower-cased like the corpus; a character the corpus
  // does not contain is an Error naming it.
  std::vector<int32_t> encode(std::string_view utf8) const;

 private:
  static CharCorpus build(std::string_view utf8, const std::string& where);
  std::vector<char32_t> chars_;
  std::vector<int32_t> ids_;
};

// UTF-8 bytes -> code points, strictly; errors start with `where` and give the byte offset.
std::vector<char32_t> decode_utf8(std::string_view utf8, const std::string& where);
// Appends code point c (at most U+10FFFF, not a surrogate) to out as UTF-8.
void append_utf8(char32_t c, std::string* out);

// The windows as the loader sees them: x = the `window` ids as floats (sample_shape {window}),
// y = the id of the next character. Sample k is window k of the corpus.
class CharWindowDataset : public loader::Dataset {
 public:
  explicit CharWindowDataset(const CharCorpus& corpus, int window = 40, int step = 3);
  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{window_}; }
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override;
  int num_classes() const { return num_classes_; }

 private:
  std::vector<int32_t> ids_;
  int window_, step_, num_classes_;
  int64_t n_;
};

// The files searched when no --data flag is given, in order (data/paths.h):
// $LOUPE_DATA/nietzsche/nietzsche.txt,
// ~/.cache/loupe/nietzsche/nietzsche.txt (where data/fetch.sh nietzsche puts it),
// data/nietzsche/nietzsche.txt.
std::vector<std::string> default_nietzsche_paths();
// The first of default_nietzsche_paths() that is a non-empty file; empty if none.
std::optional<std::string> find_default_nietzsche_path();

}  // namespace loupe::data
