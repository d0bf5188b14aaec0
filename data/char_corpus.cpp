#include "data/char_corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/file_check.h"
#include "data/paths.h"

namespace fs = std::filesystem;

namespace loupe::data {
namespace {

std::string hex_byte(unsigned char b) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%02x", b);
  return s;
}

std::string code_point_name(char32_t c) {
  char s[16];
  std::snprintf(s, sizeof s, "U+%04X", unsigned(c));
  return s;
}

// The most text from_file() reads, checked (stat) before reading: a text is held about nine times
// over while the corpus is built (its UTF-8, its code points, their ids) and its ids twice while
// training (the corpus and the windows' dataset), so 64 MiB costs some 600 MB. That is 100 times
// the Nietzsche text of char_lstm and ten times the complete works of Shakespeare.
constexpr uint64_t kMaxTextBytes = uint64_t(64) << 20;

char32_t lower_ascii(char32_t c) { return c >= U'A' && c <= U'Z' ? c - U'A' + U'a' : c; }

void check_window(int window, int step) {
  if (window <= 0 || step <= 0)
    throw Error("CharCorpus: window " + std::to_string(window) + " and step " + std::to_string(step) +
                " must both be positive");
}

}  // namespace

std::vector<char32_t> decode_utf8(std::string_view s, const std::string& where) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    int len;
    char32_t c, min;  // min: the smallest code point this length may encode (smaller is overlong)
    if ((b & 0xE0) == 0xC0) { len = 2; c = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; c = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; c = b & 0x07; min = 0x10000; }
    else throw Error(where + ": invalid UTF-8 at byte offset " + std::to_string(i) + ": " + hex_byte(b) +
                     " cannot start a character; is the file in another encoding (Latin-1)? Convert it with iconv");
    if (i + size_t(len) > s.size())
      throw Error(where + ": invalid UTF-8 at byte offset " + std::to_string(i) + ": the text ends inside a " +
                  std::to_string(len) + "-byte character (a cut-short file?)");
    for (int k = 1; k < len; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((t & 0xC0) != 0x80)
        throw Error(where + ": invalid UTF-8 at byte offset " + std::to_string(i) + ": byte " + hex_byte(t) +
                    " at offset " + std::to_string(i + size_t(k)) + " should continue the " + std::to_string(len) +
                    "-byte character begun by " + hex_byte(b));
      c = (c << 6) | (t & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
      throw Error(where + ": invalid UTF-8 at byte offset " + std::to_string(i) + ": " + std::to_string(len) +
                  " bytes encode " + code_point_name(c) +
                  (c < min ? ", an overlong form" : ", which is not a Unicode scalar value"));
    out.push_back(c);
    i += size_t(len);
  }
  return out;
}

void append_utf8(char32_t c, std::string* out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    throw Error("append_utf8: " + code_point_name(c) + " is not a Unicode scalar value");
  if (c < 0x80) {
    out->push_back(char(c));
  } else if (c < 0x800) {
    out->push_back(char(0xC0 | (c >> 6)));
    out->push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(char(0xE0 | (c >> 12)));
    out->push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(char(0x80 | (c & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (c >> 18)));
    out->push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(char(0x80 | (c & 0x3F)));
  }
}

CharCorpus CharCorpus::build(std::string_view utf8, const std::string& where) {
  std::vector<char32_t> text = decode_utf8(utf8, where);
  for (char32_t& c : text) c = lower_ascii(c);
  CharCorpus cc;
  cc.chars_ = text;
  std::sort(cc.chars_.begin(), cc.chars_.end());
  cc.chars_.erase(std::unique(cc.chars_.begin(), cc.chars_.end()), cc.chars_.end());
  cc.chars_.shrink_to_fit();  // else it keeps the whole text's capacity, 4 bytes a character, for good
  cc.ids_.reserve(text.size());
  for (char32_t c : text) cc.ids_.push_back(cc.id(c));
  return cc;
}

CharCorpus CharCorpus::from_text(std::string_view utf8) { return build(utf8, "text"); }

CharCorpus CharCorpus::from_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(path + ": file not found; give a UTF-8 text file, or run data/fetch.sh nietzsche for the text "
                "the Keras example uses");
  if (fs::is_directory(path, ec)) throw Error(path + ": is a directory; give a UTF-8 text file");
  if (const std::string kind = what_else(path); !kind.empty()) throw Error(path + ": is " + kind + "; give a UTF-8 text file");
  std::string bytes;
  uint64_t size = 0;
  if (!read_capped(path, kMaxTextBytes, &bytes, &size))
    throw Error(path + ": " + with_commas(size) + " bytes, more than the " + with_commas(kMaxTextBytes) +
                " (64 MiB) of text loupe reads for char_lstm (the Nietzsche text is 600 KB): give a smaller text");
  if (bytes.empty()) throw Error(path + ": the file is empty; give a UTF-8 text file with some prose in it");
  return build(bytes, path);
}

int32_t CharCorpus::id(char32_t c) const {
  auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
  return it != chars_.end() && *it == c ? int32_t(it - chars_.begin()) : -1;
}

int64_t CharCorpus::num_windows(int window, int step) const {
  check_window(window, step);
  return length() > window ? (length() - window - 1) / step + 1 : 0;
}

std::vector<int32_t> CharCorpus::window(int64_t k, int window, int step) const {
  if (k < 0 || k >= num_windows(window, step))
    throw Error("CharCorpus: window " + std::to_string(k) + " is out of range for " +
                std::to_string(num_windows(window, step)) + " windows");
  return std::vector<int32_t>(ids_.begin() + k * step, ids_.begin() + k * step + window);
}

int32_t CharCorpus::target(int64_t k, int window, int step) const {
  if (k < 0 || k >= num_windows(window, step))
    throw Error("CharCorpus: window " + std::to_string(k) + " is out of range for " +
                std::to_string(num_windows(window, step)) + " windows");
  return ids_[size_t(k * step + window)];
}

std::string CharCorpus::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t i : ids) {
    if (i < 0 || i >= vocab_size())
      throw Error("CharCorpus: id " + std::to_string(i) + " is out of range for " + std::to_string(vocab_size()) +
                  " characters");
    append_utf8(chars_[size_t(i)], &out);
  }
  return out;
}

std::vector<int32_t> CharCorpus::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  for (char32_t c : decode_utf8(utf8, "seed text")) {
    const int32_t i = id(lower_ascii(c));
    if (i < 0) {
      std::string ch;
      append_utf8(c, &ch);
      throw Error("seed text: the character '" + ch + "' (" + code_point_name(c) +
                  ") does not occur in the corpus, so the model has no id for it; leave it out");
    }
    out.push_back(i);
  }
  return out;
}

CharWindowDataset::CharWindowDataset(const CharCorpus& corpus, int window, int step)
    : ids_(corpus.ids()), window_(window), step_(step), num_classes_(corpus.vocab_size()),
      n_(corpus.num_windows(window, step)) {
  if (n_ == 0)
    throw Error("CharWindowDataset: the text has " + std::to_string(corpus.length()) +
                " characters, too few for one window of " + std::to_string(window) + " and the character after it");
}

void CharWindowDataset::get(int64_t i, float* x, int32_t* y, uint64_t) const {
  if (i < 0 || i >= n_)
    throw Error("CharWindowDataset: sample index " + std::to_string(i) + " is out of range for " +
                std::to_string(n_) + " samples");
  const int32_t* src = ids_.data() + i * step_;
  for (int k = 0; k < window_; ++k) x[k] = float(src[k]);
  *y = src[window_];
}

std::vector<std::string> default_nietzsche_paths() { return search_places("nietzsche/nietzsche.txt"); }

std::optional<std::string> find_default_nietzsche_path() {
  return first_usable(default_nietzsche_paths(), [](const std::string& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && fs::file_size(p, ec) > 0 && !ec;
  });
}

}  // namespace loupe::data
