#include "data/imdb.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/file_check.h"
#include "data/paths.h"
#include "data/text.h"

namespace fs = std::filesystem;

namespace loupe::data {
namespace {

const char* kTop = "aclImdb";
const char* kSplits[2] = {"train", "test"};
const char* kClasses[2] = {"neg", "pos"};  // label = index: 0 negative, 1 positive
const char* kFetch = "run data/fetch.sh imdb (it fills ~/.cache/loupe/imdb), or pass --data with the aclImdb "
                     "folder of aclImdb_v1.tar.gz or its parent";

[[noreturn]] void bad(const fs::path& path, const std::string& msg) { throw Error(path.string() + ": " + msg); }

bool has_review_folders(const fs::path& d) {
  std::error_code ec;
  for (const char* s : kSplits)
    for (const char* c : kClasses)
      if (!fs::is_directory(d / s / c, ec)) return false;
  return true;
}

// The aclImdb folder: `dir` itself, or its aclImdb child.
fs::path top_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": IMDb data directory not found; " + kFetch);
  const fs::path d(dir);
  if (!fs::exists(d / "train", ec) && !fs::exists(d / "test", ec) && fs::is_directory(d / kTop, ec)) return d / kTop;
  return d;
}

std::string read_text(const fs::path& path) {
  if (const std::string kind = what_else(path.string()); !kind.empty()) bad(path, "is " + kind + ", not a review file");
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, std::string("cannot open: ") + std::strerror(errno));
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) bad(path, "read error");
  return s;
}

// Appends the reviews of one folder (its *.txt files in name order) and their label.
void read_folder(const fs::path& folder, uint8_t label, std::vector<std::string>* text,
                 std::vector<uint8_t>* labels) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    bad(folder, "folder not found; an aclImdb folder holds train/pos, train/neg, test/pos and test/neg; " +
                    std::string(kFetch));
  std::vector<std::string> names;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".txt" && it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  if (ec) bad(folder, "cannot list: " + ec.message());
  if (names.empty())
    bad(folder, "holds no .txt review files (aclImdb has 12500 in each folder); the download or extraction "
                "was cut short: delete the aclImdb folder and run data/fetch.sh imdb again");
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    text->push_back(read_text(folder / n));
    labels->push_back(label);
  }
}

std::string with_commas(int64_t v) {  // v >= 0
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

}  // namespace

ImdbText load_aclimdb(const std::string& dir) {
  const fs::path d = top_dir(dir);
  ImdbText t;
  t.dir = d.string();
  for (int label : {0, 1}) read_folder(d / "train" / kClasses[label], uint8_t(label), &t.train_text, &t.train_labels);
  for (int label : {0, 1}) read_folder(d / "test" / kClasses[label], uint8_t(label), &t.test_text, &t.test_labels);
  return t;
}

std::vector<std::string> default_imdb_dirs() { return search_places("imdb"); }

std::optional<std::string> find_default_imdb_dir() {
  return first_usable(default_imdb_dirs(), [](const std::string& dir) {
    return has_review_folders(fs::path(dir) / kTop) || has_review_folders(dir);
  });
}

std::string imdb_not_found() {
  return not_found("IMDb (aclImdb)", default_imdb_dirs(),
                   "Fetch it with: data/fetch.sh imdb   (or train on data of its shape with --synthetic or "
                   "--synthetic=learnable)");
}

SequenceDataset::SequenceDataset(std::vector<int32_t> ids, std::vector<int32_t> labels, int maxlen)
    : ids_(std::move(ids)), labels_(std::move(labels)), maxlen_(maxlen) {
  if (maxlen_ <= 0) throw Error("SequenceDataset: maxlen is " + std::to_string(maxlen_) + "; it must be positive");
  if (ids_.size() != labels_.size() * size_t(maxlen_))
    throw Error("SequenceDataset: " + std::to_string(ids_.size()) + " ids do not make " +
                std::to_string(labels_.size()) + " sequences of " + std::to_string(maxlen_) +
                "; pass the padded n x maxlen ids of pad_sequences() and one label per sequence");
  // The loader carries samples as floats: integers are exact only up to 2^24.
  constexpr int32_t kExact = 1 << 24;
  for (size_t k = 0; k < ids_.size(); ++k)
    if (ids_[k] < 0 || ids_[k] >= kExact)
      throw Error("SequenceDataset: id " + std::to_string(ids_[k]) + " at sequence " + std::to_string(k / maxlen_) +
                  ", position " + std::to_string(k % maxlen_) + " is outside [0, 2^24), where floats hold "
                  "integers exactly; use a smaller vocabulary (fewer words or no bigrams)");
}

void SequenceDataset::get(int64_t i, float* x, int32_t* y, uint64_t) const {
  if (i < 0 || i >= size())
    throw Error("SequenceDataset: sample index " + std::to_string(i) + " is out of range for " +
                std::to_string(size()) + " samples");
  const int32_t* src = ids_.data() + i * maxlen_;
  for (int k = 0; k < maxlen_; ++k) x[k] = float(src[k]);
  *y = labels_[size_t(i)];
}

ImdbSequences make_imdb_sequences(const ImdbText& text, int num_words, int maxlen, bool bigrams) {
  if (maxlen <= 0) throw Error("make_imdb_sequences: maxlen is " + std::to_string(maxlen) + "; it must be positive");
  // Count first, encode after: the tokens of 25,000 reviews are never all held at once.
  WordCounter counter;
  for (const std::string& doc : text.train_text) counter.add(tokenize(doc));
  const Vocabulary vocab = counter.vocabulary(num_words);
  auto encode_all = [&](const std::vector<std::string>& docs) {
    std::vector<std::vector<int32_t>> seqs;
    seqs.reserve(docs.size());
    for (const std::string& doc : docs) seqs.push_back(vocab.encode(tokenize(doc)));
    return seqs;
  };
  std::vector<std::vector<int32_t>> train = encode_all(text.train_text), test = encode_all(text.test_text);

  ImdbSequences s;
  s.vocab_size = vocab.size();
  std::string extra;
  if (bigrams) {
    const Bigrams b = build_bigrams(train, num_words);
    for (auto& seq : train) seq = add_bigrams(seq, b);
    for (auto& seq : test) seq = add_bigrams(seq, b);
    s.vocab_size = b.vocab_size;
    extra = " + " + with_commas(int64_t(b.ids.size())) + " training bigrams from id " + std::to_string(num_words + 1) +
            " (embedding input " + with_commas(b.vocab_size) + ")";
  }
  int64_t total = 0, cut = 0;
  for (const auto& seq : train) {
    total += int64_t(seq.size());
    cut += seq.size() > size_t(maxlen);
  }
  s.n_train = int64_t(train.size());
  s.n_test = int64_t(test.size());
  s.maxlen = maxlen;
  s.train_x = pad_sequences(train, maxlen);
  s.test_x = pad_sequences(test, maxlen);
  s.train_y = text.train_labels;
  s.test_y = text.test_labels;
  char lens[160];
  std::snprintf(lens, sizeof lens, "; train sequences average %.1f ids, %.1f%% cut to the last %d, shorter ones "
                "zero-padded in front", s.n_train ? double(total) / double(s.n_train) : 0.0,
                s.n_train ? 100.0 * double(cut) / double(s.n_train) : 0.0, maxlen);
  s.description = "IMDb (" + text.dir + "): " + with_commas(s.n_train) + " train / " + with_commas(s.n_test) +
                  " test reviews; vocabulary " + with_commas(vocab.size() - Vocabulary::kFirstWord) + " of " +
                  with_commas(int64_t(counter.distinct_words())) + " training words (ids 3.." +
                  std::to_string(vocab.size() - 1) + "; 0 pad, 1 start, 2 out of vocabulary)" + extra + lens;
  return s;
}

}  // namespace loupe::data
