#include "data/imdb.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

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
  if (const std::string why = directory_problem(dir, "IMDb data directory"); !why.empty())
    throw Error(dir + ": " + why + "; " + kFetch);
  const fs::path d(dir);
  if (!fs::exists(d / "train", ec) && !fs::exists(d / "test", ec) && fs::is_directory(d / kTop, ec)) return d / kTop;
  return d;
}

// The most loupe reads for one review: aclImdb's longest is about 14 KB (they average 1.3 KB), and
// tokenizing a review holds about 20 bytes per byte of it at once (one std::string per word), so
// 1 MiB, 70 times the longest, costs some 20 MiB; a 200 MB file took 4.5 GB. A larger file is not a
// review.
constexpr uint64_t kMaxReviewBytes = uint64_t(1) << 20;
// The most for the four folders together, summed from the files' sizes before any is read:
// aclImdb's 50,000 reviews are about 65 MB, and the text is held with its ids and imdb_fasttext's
// bigrams, about 4 bytes per byte of text (measured on reviews of a Zipf vocabulary: 65 MB took
// 280 MB, 250 MB took 930 MB), so 128 MiB, twice aclImdb, keeps the load near half a gigabyte.
constexpr uint64_t kMaxImdbBytes = uint64_t(128) << 20;
// The most distinct words the training reviews may hold: aclImdb's 25,000 hold 88,584 (Keras'
// word index), and counting costs about 100 bytes a distinct word (the string, its map entry), so
// a corpus of nothing but distinct words inside the 128 MiB above, some 18 million of them, would
// take about 2 GB. Ten times aclImdb's, the count stays near 100 MB.
constexpr size_t kMaxDistinctWords = 1000000;

std::string review_too_large(uint64_t size) {
  return with_commas(size) + " bytes, more than the " + with_commas(kMaxReviewBytes) +
         " (1 MiB) loupe reads for one review (aclImdb's longest is about 14 KB): not a review; remove it from "
         "the folder";
}

std::string read_review(const fs::path& path) {
  std::string s;
  uint64_t size = 0;
  if (!read_capped(path.string(), kMaxReviewBytes, &s, &size)) refuse_file(path, review_too_large(size));  // it grew
  return s;
}

// The review files of one folder (its *.txt files), sorted by name.
std::vector<fs::path> list_folder(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    refuse_file(folder, "folder not found; an aclImdb folder holds train/pos, train/neg, test/pos and test/neg; " +
                    std::string(kFetch));
  std::vector<std::string> names;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".txt" && it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  if (ec) refuse_file(folder, "cannot list: " + ec.message());
  if (names.empty())
    refuse_file(folder, "holds no .txt review files (aclImdb has 12500 in each folder); the download or extraction "
                "was cut short: delete the aclImdb folder and run data/fetch.sh imdb again");
  std::sort(names.begin(), names.end());
  std::vector<fs::path> files;
  for (const std::string& n : names) files.push_back(folder / n);
  return files;
}

// Every review's size (stat), each within kMaxReviewBytes and all within kMaxImdbBytes, before
// any is read.
void check_sizes(const fs::path& top, const std::vector<fs::path>& files) {
  uint64_t total = 0;
  for (const fs::path& f : files) {
    if (const std::string kind = what_else(f.string()); !kind.empty()) refuse_file(f, "is " + kind + ", not a review file");
    std::error_code ec;
    const uint64_t size = fs::file_size(f, ec);
    if (ec) refuse_file(f, "cannot read its size: " + ec.message());
    if (size > kMaxReviewBytes) refuse_file(f, review_too_large(size));
    total += size;
  }
  if (total > kMaxImdbBytes)
    refuse_file(top, "its four review folders hold " + with_commas(total) + " bytes, more than the " +
                 with_commas(kMaxImdbBytes) + " (128 MiB) loupe reads (aclImdb's 50,000 reviews are about 65 MB): "
                 "not the IMDb reviews; pass --data with the aclImdb folder");
}

}  // namespace

ImdbText load_aclimdb(const std::string& dir) {
  const fs::path d = top_dir(dir);
  std::vector<fs::path> folders[2][2], all;  // [split][label]
  for (int s = 0; s < 2; ++s)
    for (int label : {0, 1}) {
      folders[s][label] = list_folder(d / kSplits[s] / kClasses[label]);
      all.insert(all.end(), folders[s][label].begin(), folders[s][label].end());
    }
  check_sizes(d, all);
  ImdbText t;
  t.dir = d.string();
  for (int s = 0; s < 2; ++s)
    for (int label : {0, 1})
      for (const fs::path& f : folders[s][label]) {
        (s == 0 ? t.train_text : t.test_text).push_back(read_review(f));
        (s == 0 ? t.train_labels : t.test_labels).push_back(uint8_t(label));
      }
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

namespace {
uint32_t crc_of(uint32_t crc, const void* p, size_t n) { return uint32_t(crc32(crc, static_cast<const Bytef*>(p), uInt(n))); }

std::string crc_hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The words in id order: their count, the first three and a CRC32 of them all, newline-separated.
std::string fingerprint(const Vocabulary& vocab) {
  uint32_t crc = 0;
  std::string first;
  for (int32_t id = Vocabulary::kFirstWord; id < vocab.size(); ++id) {
    const std::string w = vocab.word(id) + "\n";
    crc = crc_of(crc, w.data(), w.size());
    if (id < Vocabulary::kFirstWord + 3) first += "'" + vocab.word(id) + "', ";
  }
  return std::to_string(vocab.size() - Vocabulary::kFirstWord) + " words (" + first + "...), crc32 " + crc_hex(crc);
}

// The bigrams in id order (their two word ids each), so their numbering is checked too.
std::string bigram_fingerprint(const Bigrams& b) {
  std::vector<std::pair<int32_t, uint64_t>> by_id;
  by_id.reserve(b.ids.size());
  for (const auto& [key, id] : b.ids) by_id.emplace_back(id, key);
  std::sort(by_id.begin(), by_id.end());
  uint32_t crc = 0;
  for (const auto& [id, key] : by_id) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = uint8_t(key >> (8 * i));
    crc = crc_of(crc, le, sizeof le);
  }
  return ", " + std::to_string(by_id.size()) + " bigrams, crc32 " + crc_hex(crc);
}
}  // namespace

ImdbSequences make_imdb_sequences(const ImdbText& text, int num_words, int maxlen, bool bigrams) {
  if (maxlen <= 0) throw Error("make_imdb_sequences: maxlen is " + std::to_string(maxlen) + "; it must be positive");
  // Count first, encode after: the tokens of 25,000 reviews are never all held at once.
  WordCounter counter;
  for (const std::string& doc : text.train_text) {
    counter.add(tokenize(doc));  // one review (1 MiB at most) past the cap before it is seen
    if (counter.distinct_words() > kMaxDistinctWords)
      throw Error((text.dir.empty() ? std::string("the IMDb reviews") : text.dir) + ": the training reviews hold more than " +
                  with_commas(kMaxDistinctWords) + " distinct words, the most loupe counts (aclImdb's hold 88,584): "
                  "not the IMDb reviews, or damaged; pass --data with the aclImdb folder");
  }
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
  s.vocab_fingerprint = fingerprint(vocab);
  std::string extra;
  if (bigrams) {
    const Bigrams b = build_bigrams(train, num_words);
    for (auto& seq : train) seq = add_bigrams(seq, b);
    for (auto& seq : test) seq = add_bigrams(seq, b);
    s.vocab_size = b.vocab_size;
    s.vocab_fingerprint += bigram_fingerprint(b);
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
