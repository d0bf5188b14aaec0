#include "data/text.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace loupe::data {
namespace {

bool word_byte(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\''; }

}  // namespace

std::vector<std::string> tokenize(std::string_view text) {
  static constexpr std::string_view kBr = "<br />";
  std::vector<std::string> tokens;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) tokens.push_back(std::move(cur));
    cur.clear();
  };
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kBr.size(), kBr) == 0) {
      flush();
      i += kBr.size();
      continue;
    }
    char c = text[i++];
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (word_byte(c))
      cur.push_back(c);
    else
      flush();
  }
  flush();
  return tokens;
}

void WordCounter::add(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    auto it = counts_.try_emplace(t, Entry{0, seen_}).first;
    ++it->second.count;
    ++seen_;
  }
}

Vocabulary WordCounter::vocabulary(int num_words) const {
  if (num_words < Vocabulary::kFirstWord)
    throw Error("Vocabulary: num_words is " + std::to_string(num_words) + ", but ids 0, 1 and 2 are "
                "reserved (padding, start, out of vocabulary): pass at least 3");
  struct Ranked {
    const std::string* word;
    Entry e;
  };
  std::vector<Ranked> r;
  r.reserve(counts_.size());
  for (const auto& [w, e] : counts_) r.push_back({&w, e});
  const size_t keep = std::min(r.size(), size_t(num_words - Vocabulary::kFirstWord));
  // Falling count, then first occurrence: `first` is unique per word, so the order is total.
  auto before = [](const Ranked& a, const Ranked& b) {
    return a.e.count != b.e.count ? a.e.count > b.e.count : a.e.first < b.e.first;
  };
  std::partial_sort(r.begin(), r.begin() + keep, r.end(), before);
  Vocabulary v;
  v.words_.reserve(keep);
  v.ids_.reserve(keep);
  for (size_t k = 0; k < keep; ++k) {
    v.ids_.emplace(*r[k].word, int32_t(Vocabulary::kFirstWord + k));
    v.words_.push_back(*r[k].word);
  }
  return v;
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& docs, int num_words) {
  WordCounter c;
  for (const auto& d : docs) c.add(d);
  return c.vocabulary(num_words);
}

int32_t Vocabulary::id(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kOov : it->second;
}

std::string Vocabulary::word(int32_t id) const {
  switch (id) {
    case kPad: return "<pad>";
    case kStart: return "<start>";
    case kOov: return "<oov>";
    default: break;
  }
  if (id < 0 || id >= size())
    throw Error("Vocabulary: id " + std::to_string(id) + " is out of range; this vocabulary has ids 0 to " +
                std::to_string(size() - 1));
  return words_[size_t(id - kFirstWord)];
}

std::vector<int32_t> Vocabulary::encode(const std::vector<std::string>& tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size() + 1);
  ids.push_back(kStart);
  for (const std::string& t : tokens) ids.push_back(id(t));
  return ids;
}

std::vector<int32_t> pad_sequences(const std::vector<std::vector<int32_t>>& seqs, int maxlen) {
  if (maxlen <= 0) throw Error("pad_sequences: maxlen is " + std::to_string(maxlen) + "; it must be positive");
  std::vector<int32_t> out(seqs.size() * size_t(maxlen), Vocabulary::kPad);
  for (size_t n = 0; n < seqs.size(); ++n) {
    const std::vector<int32_t>& s = seqs[n];
    const size_t len = std::min(s.size(), size_t(maxlen));
    // The last `len` ids of s go to the end of the row: truncation and padding both at the front.
    std::copy(s.end() - std::ptrdiff_t(len), s.end(), out.begin() + std::ptrdiff_t((n + 1) * maxlen - len));
  }
  return out;
}

Bigrams build_bigrams(const std::vector<std::vector<int32_t>>& train_seqs, int num_words) {
  Bigrams b;
  int32_t next = int32_t(num_words) + 1;
  for (const auto& s : train_seqs)
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (b.ids.try_emplace(bigram_key(s[i], s[i + 1]), next).second) {
        if (next == INT32_MAX) throw Error("build_bigrams: more than 2^31 bigram ids");
        ++next;
      }
  b.vocab_size = b.ids.empty() ? int32_t(num_words) : next;  // next = largest id + 1
  return b;
}

std::vector<int32_t> add_bigrams(const std::vector<int32_t>& seq, const Bigrams& bigrams) {
  std::vector<int32_t> out(seq);
  for (size_t i = 0; i + 1 < seq.size(); ++i) {
    auto it = bigrams.ids.find(bigram_key(seq[i], seq[i + 1]));
    if (it != bigrams.ids.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace loupe::data
