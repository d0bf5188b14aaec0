// The text readers: the aclImdb tokenizer, vocabulary, padding and fastText bigrams (data/text.cpp,
// data/imdb.cpp's make_imdb_sequences and SequenceDataset), and char_lstm's UTF-8 corpus and
// windows (data/char_corpus.cpp). The bytes are the text: its lines are the reviews (alternately
// negative and positive, two of every four for training); the first and last bytes pick the
// vocabulary size, maxlen and the corpus' window and step, so a corpus file stays plain text.
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/char_corpus.h"
#include "data/imdb.h"
#include "data/text.h"
#include "fuzz_util.h"

namespace {

using namespace loupe::data;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void imdb(std::string_view text, int num_words, int maxlen) {
  ImdbText t;
  t.dir = "fuzz";
  size_t line = 0;
  for (size_t begin = 0; begin <= text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string doc(text.substr(begin, end - begin));
    const uint8_t label = uint8_t(line % 2);
    if (line % 4 < 2) t.train_text.push_back(std::move(doc)), t.train_labels.push_back(label);
    else t.test_text.push_back(std::move(doc)), t.test_labels.push_back(label);
    begin = end + 1;
  }
  for (bool bigrams : {false, true}) {
    const ImdbSequences s = make_imdb_sequences(t, num_words, maxlen, bigrams);
    check(s.train_x.size() == size_t(s.n_train) * size_t(maxlen) && s.test_x.size() == size_t(s.n_test) * size_t(maxlen));
    for (int32_t id : s.train_x) check(id >= 0 && id < s.vocab_size);
    for (int32_t id : s.test_x) check(id >= 0 && id < s.vocab_size);
    std::vector<int32_t> y(s.train_y.begin(), s.train_y.end());
    SequenceDataset d(s.train_x, y, maxlen);
    std::vector<float> x(static_cast<size_t>(maxlen));
    int32_t label = 0;
    for (int64_t i = 0; i < d.size(); ++i) d.get(i, x.data(), &label, 0);
  }
  // The vocabulary itself: every id has a word, and that word has the id (words are unique).
  std::vector<std::vector<std::string>> docs;
  for (const std::string& doc : t.train_text) docs.push_back(tokenize(doc));
  const Vocabulary v = Vocabulary::build(docs, num_words);
  for (int32_t id = Vocabulary::kFirstWord; id < v.size(); ++id) check(v.id(v.word(id)) == id);
  try {
    v.word(v.size());
    check(false);
  } catch (const loupe::Error&) {  // as it should
  }
}

void chars(std::string_view text, int window, int step) {
  CharCorpus c = CharCorpus::from_text(text);
  // Strict UTF-8 both ways: the text decodes only if encoding its code points gives it back.
  std::string again;
  for (char32_t cp : decode_utf8(text, "fuzz")) append_utf8(cp, &again);
  check(again == text);
  check(c.encode(c.decode(c.ids())) == c.ids());
  const int64_t n = c.num_windows(window, step);
  for (int64_t k = 0; k < std::min<int64_t>(n, 64); ++k) {
    check(c.window(k, window, step).size() == size_t(window));
    const int32_t t = c.target(k, window, step);
    check(t >= 0 && t < c.vocab_size());
  }
  CharWindowDataset d(c, window, step);
  std::vector<float> x(static_cast<size_t>(window));
  int32_t y = 0;
  for (int64_t i = 0; i < std::min<int64_t>(d.size(), 64); ++i) d.get(i, x.data(), &y, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const uint8_t first = size ? data[0] : 0, last = size ? data[size - 1] : 0;
  try {
    imdb(text, 3 + first % 64, 1 + last % 32);
    loupe::fuzz::accepted("IMDb sequences");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  try {
    chars(text, 1 + first % 41, 1 + last % 4);
    loupe::fuzz::accepted("a character corpus");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  return 0;
}
