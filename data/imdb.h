// The IMDb movie-review data set in its published layout (aclImdb_v1.tar.gz from
// ai.stanford.edu/~amaas/data/sentiment): aclImdb/{train,test}/{pos,neg}/*.txt, one review per
// file (12,500 in each folder), and the padded id sequences that imdb_bilstm and imdb_fasttext read.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace loupe::data {

struct ImdbText {
  std::string dir;  // the aclImdb folder actually read
  std::vector<std::string> train_text, test_text;
  std::vector<uint8_t> train_labels, test_labels;  // 1 = positive, 0 = negative
};

// Reads train/neg, train/pos, test/neg, test/pos (in that order: negatives first within each
// split), each folder's *.txt files sorted by file name (as strings: "10_2.txt" < "1_1.txt").
// `dir` may be the aclImdb folder or its parent. A missing folder, or one with no .txt file, is a
// loupe::Error naming it; so is a review over 1 MiB, or all four folders over 128 MiB, from the
// files' sizes before any is read. Other entries (train/unsup, the .feat files, imdb.vocab) are ignored.
ImdbText load_aclimdb(const std::string& dir);

// The directories searched when no --data flag is given, in order (data/paths.h): $LOUPE_DATA/imdb,
// ~/.cache/loupe/imdb (where data/fetch.sh imdb puts aclImdb/), data/imdb.
std::vector<std::string> default_imdb_dirs();

// The first of default_imdb_dirs() holding aclImdb/ with its four review folders (or the folders
// themselves); empty if none.
std::optional<std::string> find_default_imdb_dir();

// The error when find_default_imdb_dir() finds nothing: the places it looked and how to fetch it.
std::string imdb_not_found();

// Sequences of ids as the loader sees them: n x maxlen ids, written as floats (exact below 2^24,
// which the constructor checks), and an int32 label (0/1 for a review, the next character's id
// for a char_lstm window).
class SequenceDataset : public loader::Dataset {
 public:
  SequenceDataset(std::vector<int32_t> ids, std::vector<int32_t> labels, int maxlen);
  int64_t size() const override { return int64_t(labels_.size()); }
  Shape sample_shape() const override { return Shape{maxlen_}; }
  void get(int64_t i, float* x, int32_t* y, uint64_t rng) const override;

 private:
  std::vector<int32_t> ids_, labels_;
  int maxlen_;
};

// Both splits tokenized, encoded with the training vocabulary (leading start id), optionally
// extended with the training bigrams, and padded/truncated at the front to maxlen.
struct ImdbSequences {
  std::vector<int32_t> train_x, test_x;  // n x maxlen, row-major
  std::vector<uint8_t> train_y, test_y;
  int64_t n_train = 0, n_test = 0;
  int maxlen = 0;
  int vocab_size = 0;  // the embedding's input size: Vocabulary::size(), or Bigrams::vocab_size
  std::string description;  // one line for the log: sizes, vocabulary, bigrams, lengths
  // What defines the ids, in one line stored in checkpoints: "19997 words ('the', 'and', 'a', ...),
  // crc32 1a2b3c4d" (+ ", 1180000 bigrams, crc32 ..."), the CRCs over the words and bigrams in id order.
  std::string vocab_fingerprint;
};

// imdb_bilstm: (text, 20000, 100, false); imdb_fasttext: (text, 20000, 400, true).
ImdbSequences make_imdb_sequences(const ImdbText& text, int num_words, int maxlen, bool bigrams);

}  // namespace loupe::data
