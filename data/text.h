// Words to ids for the IMDb models, as Keras' imdb loader and examples prepare them: a tokenizer, a
// vocabulary of the most frequent training words, front padding/truncation and fastText bigrams.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loupe::data {

// Splits a review into words: every "<br />" (aclImdb's line breaks) becomes a space, ASCII letters
// are lower-cased, and the tokens are the maximal runs of [a-z0-9']. Everything else separates
// tokens, bytes >= 0x80 included (so "café" gives "caf"; the reviews are almost all ASCII).
// A run of apostrophes alone ("'") is a token too: the rule is applied as is.
std::vector<std::string> tokenize(std::string_view text);

class WordCounter;

// Word ids as Keras' imdb.load_data(num_words=N, start_char=1, oov_char=2, index_from=3) gives
// them: 0 = padding, 1 = start of a review, 2 = out of vocabulary, and the training words by
// falling frequency from 3 on (the most frequent gets 3; Keras' ranks start at 1, so there it gets
// 4 and id 3 is never used). Only ids below num_words are kept: num_words = 20000 keeps 19,997
// words. Ties in count are broken by first occurrence in the training documents (document order,
// then token order), so the vocabulary is a pure function of the documents and their order.
class Vocabulary {
 public:
  static constexpr int32_t kPad = 0, kStart = 1, kOov = 2, kFirstWord = 3;

  // docs: the tokenized training documents. num_words >= 3 (3 keeps no word at all).
  static Vocabulary build(const std::vector<std::vector<std::string>>& docs, int num_words);

  int32_t id(const std::string& word) const;  // kOov when the word is not kept
  // The word of an id; "<pad>", "<start>", "<oov>" for 0, 1, 2. Throws for ids outside [0, size()).
  std::string word(int32_t id) const;
  // 3 + the number of words kept: num_words, or fewer when the corpus has fewer distinct words.
  int size() const { return kFirstWord + int(words_.size()); }
  // The ids of a document with a leading kStart, as Keras' loader returns each review.
  std::vector<int32_t> encode(const std::vector<std::string>& tokens) const;

 private:
  friend class WordCounter;
  std::vector<std::string> words_;  // words_[k] has id k + 3
  std::unordered_map<std::string, int32_t> ids_;
};

// Counts words document by document, so a large corpus need not be held tokenized all at once;
// Vocabulary::build is add() over every document followed by vocabulary().
class WordCounter {
 public:
  void add(const std::vector<std::string>& tokens);
  Vocabulary vocabulary(int num_words) const;
  size_t distinct_words() const { return counts_.size(); }

 private:
  struct Entry {
    int64_t count, first;  // first: position of the first occurrence over all documents
  };
  std::unordered_map<std::string, Entry> counts_;
  int64_t seen_ = 0;
};

// Keras' pad_sequences(seqs, maxlen) with its defaults padding='pre', truncating='pre', value=0:
// a sequence longer than maxlen keeps its LAST maxlen ids; a shorter one gets zeros in front.
// Returns n x maxlen ids, row-major.
std::vector<int32_t> pad_sequences(const std::vector<std::vector<int32_t>>& seqs, int maxlen);

// The bigram features of Keras' examples/imdb_fasttext.py with ngram_range=2.
struct Bigrams {
  std::unordered_map<uint64_t, int32_t> ids;  // bigram_key(a, b) -> id
  int32_t vocab_size = 0;                     // largest id + 1: the embedding's input size
};

inline uint64_t bigram_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// Every adjacent pair of ids in the (encoded, unpadded) training sequences gets an id from
// num_words + 1 on (Keras: start_index = max_features + 1, so id num_words itself is unused),
// numbered in order of first occurrence. Keras numbered the pairs in the iteration order of a
// Python set, which is arbitrary; only the numbering differs, not which pairs have ids.
// With no pairs at all, vocab_size = num_words.
Bigrams build_bigrams(const std::vector<std::vector<int32_t>>& train_seqs, int num_words);

// Keras' add_ngram: seq followed by the ids of its known bigrams, in the order they occur. Used
// alike on the training and the test sequences (test pairs never seen in training are dropped).
std::vector<int32_t> add_bigrams(const std::vector<int32_t>& seq, const Bigrams& bigrams);

}  // namespace loupe::data
