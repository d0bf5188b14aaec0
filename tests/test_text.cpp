// The text data layer: the tokenizer, the vocabulary (ids, ties, the num_words cut), front padding,
// fastText bigrams, the aclImdb reader on a layout the test writes, and the character corpus. Every
// expected id below was worked out by hand from the documents written here.
#include <gtest/gtest.h>

#include "test_util.h"
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/char_corpus.h"
#include "data/imdb.h"
#include "data/text.h"

namespace fs = std::filesystem;
using namespace loupe::data;
using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;

namespace {

void write_file(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// A file of `size` bytes, sparse (no data written): hostile sizes cost the test nothing.
void sparse_file(const fs::path& p, uint64_t size) {
  write_file(p, "");
  fs::resize_file(p, size);
}

template <class F>
void expect_error(F f, const std::string& needle1, const std::string& needle2 = "") {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << needle1;
  } catch (const loupe::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle1), std::string::npos) << "message lacks '" << needle1 << "': " << msg;
    EXPECT_NE(msg.find(needle2), std::string::npos) << "message lacks '" << needle2 << "': " << msg;
  }
}

using loupe::test::EnvVar;

}  // namespace

TEST(Tokenize, Cases) {
  EXPECT_EQ(tokenize("Hello, World!"), (Words{"hello", "world"}));
  EXPECT_EQ(tokenize("It's a<br />great<br /><br />film"), (Words{"it's", "a", "great", "film"}));
  // Only the exact "<br />" is a line break; other forms fall apart at their punctuation.
  EXPECT_EQ(tokenize("x<br/>y <BR />z"), (Words{"x", "br", "y", "br", "z"}));
  EXPECT_EQ(tokenize("10/10, would watch again... 2nd time"),
            (Words{"10", "10", "would", "watch", "again", "2nd", "time"}));
  EXPECT_EQ(tokenize("'quoted' rock'n'roll ' -- isn't"), (Words{"'quoted'", "rock'n'roll", "'", "isn't"}));
  EXPECT_EQ(tokenize("ABC dEf\tGHI\nj-k_l"), (Words{"abc", "def", "ghi", "j", "k", "l"}));
  EXPECT_EQ(tokenize("AZ Zebra zZ"), (Words{"az", "zebra", "zz"}));  // both ends of the alphabet lower-cased
  // "café crème": the two bytes of é and of è separate tokens.
  EXPECT_EQ(tokenize("caf\xC3\xA9 cr\xC3\xA8me"), (Words{"caf", "cr", "me"}));
  EXPECT_EQ(tokenize(""), Words{});
  EXPECT_EQ(tokenize("<br />?!... <br />"), Words{});
  EXPECT_EQ(tokenize("<br"), (Words{"br"}));  // a cut-off tag at the end is plain text
}

namespace {

// The four training reviews of the aclImdb layout below, in the order the reader returns them.
// Tokens (position over all documents):
//   neg/0_1.txt:  bad(0) movie(1) bad(2) acting(3) bad(4) plot(5)
//   neg/1_2.txt:  not(6) good(7) the(8) plot(9) was(10) bad(11)
//   pos/10_8.txt: a(12) good(13) good(14) film(15) great(16) acting(17)
//   pos/2_7.txt:  great(18) plot(19)
// Counts: bad 4; plot 3 (first at 5), good 3 (7); acting 2 (3), great 2 (16); then once each:
// movie (1), not (6), the (8), was (10), a (12), film (15). So the ids are
//   bad 3, plot 4, good 5, acting 6, great 7, movie 8, not 9, the 10, was 11, a 12, film 13.
const char* kTrainNeg01 = "Bad movie.<br /><br />Bad acting, bad plot.";
const char* kTrainNeg12 = "Not good; the plot was bad.";
const char* kTrainPos108 = "A good, good film.<br />Great acting.";
const char* kTrainPos27 = "Great plot!";
const char* kTestNeg = "Bad film, BAD acting.";
const char* kTestPos = "The film's cast was great.";

std::vector<Words> train_docs() {
  return {tokenize(kTrainNeg01), tokenize(kTrainNeg12), tokenize(kTrainPos108), tokenize(kTrainPos27)};
}

}  // namespace

TEST(Vocabulary, IdsTiesAndCut) {
  const Vocabulary full = Vocabulary::build(train_docs(), 20000);
  EXPECT_EQ(full.size(), 14);  // 11 distinct words + 3 reserved ids
  const Words order = {"bad", "plot", "good", "acting", "great", "movie", "not", "the", "was", "a", "film"};
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(full.id(order[k]), int32_t(3 + k)) << order[k];
    EXPECT_EQ(full.word(int32_t(3 + k)), order[k]);
  }
  EXPECT_EQ(full.id("cast"), Vocabulary::kOov);
  EXPECT_EQ(full.id(""), Vocabulary::kOov);
  EXPECT_EQ(full.word(0), "<pad>");
  EXPECT_EQ(full.word(1), "<start>");
  EXPECT_EQ(full.word(2), "<oov>");
  expect_error([&] { full.word(14); }, "id 14", "0 to 13");
  expect_error([&] { full.word(-1); }, "id -1");

  // num_words = 8 keeps ids 3..7: bad plot good acting great. The rest become 2.
  const Vocabulary v8 = Vocabulary::build(train_docs(), 8);
  EXPECT_EQ(v8.size(), 8);
  EXPECT_EQ(v8.id("great"), 7);
  EXPECT_EQ(v8.id("movie"), 2);
  EXPECT_EQ(v8.encode(tokenize(kTrainNeg01)), (Ids{1, 3, 2, 3, 6, 3, 4}));
  EXPECT_EQ(v8.encode(tokenize(kTestPos)), (Ids{1, 2, 2, 2, 2, 7}));  // the film's cast was: not kept
  EXPECT_EQ(v8.encode(tokenize(kTestNeg)), (Ids{1, 3, 2, 3, 6}));
  EXPECT_EQ(v8.encode({}), (Ids{1}));

  const Vocabulary v3 = Vocabulary::build(train_docs(), 3);  // no words at all
  EXPECT_EQ(v3.size(), 3);
  EXPECT_EQ(v3.encode({"bad", "good"}), (Ids{1, 2, 2}));
  expect_error([] { Vocabulary::build({{"a"}}, 2); }, "num_words is 2", "at least 3");

  // Ties follow the document order: the same words in the other order swap ids.
  const Vocabulary ab = Vocabulary::build({{"x", "y"}, {"y", "x"}}, 10);
  const Vocabulary ba = Vocabulary::build({{"y", "x"}, {"x", "y"}}, 10);
  EXPECT_EQ(ab.id("x"), 3);
  EXPECT_EQ(ab.id("y"), 4);
  EXPECT_EQ(ba.id("y"), 3);
  EXPECT_EQ(ba.id("x"), 4);

  // WordCounter gives the same vocabulary document by document.
  WordCounter c;
  for (const Words& d : train_docs()) c.add(d);
  EXPECT_EQ(c.distinct_words(), 11u);
  const Vocabulary v = c.vocabulary(6);
  EXPECT_EQ(v.size(), 6);
  EXPECT_EQ(v.word(5), "good");
  EXPECT_EQ(v.id("acting"), 2);
}

TEST(PadSequences, PreTruncationAndPrePadding) {
  const std::vector<Ids> seqs = {{1, 2, 3}, {4, 5, 6, 7, 8, 9}, {}, {7}, {1, 2, 3, 4}};
  EXPECT_EQ(pad_sequences(seqs, 4), (Ids{0, 1, 2, 3,  //
                                         6, 7, 8, 9,  // the last four kept
                                         0, 0, 0, 0,  //
                                         0, 0, 0, 7,  //
                                         1, 2, 3, 4}));
  EXPECT_EQ(pad_sequences({}, 4), Ids{});
  expect_error([&] { pad_sequences(seqs, 0); }, "maxlen is 0");
}

TEST(Bigrams, WorkedExample) {
  // Pairs in order of first occurrence: (1,3) 11, (3,4) 12, (4,3) 13, [(3,4), (1,3) again], (3,5) 14.
  const Bigrams b = build_bigrams({{1, 3, 4, 3, 4}, {1, 3, 5}}, 10);
  EXPECT_EQ(b.ids.size(), 4u);
  EXPECT_EQ(b.ids.at(bigram_key(1, 3)), 11);
  EXPECT_EQ(b.ids.at(bigram_key(3, 4)), 12);
  EXPECT_EQ(b.ids.at(bigram_key(4, 3)), 13);
  EXPECT_EQ(b.ids.at(bigram_key(3, 5)), 14);
  EXPECT_EQ(b.ids.count(bigram_key(5, 3)), 0u);
  EXPECT_EQ(b.vocab_size, 15);
  EXPECT_EQ(add_bigrams({1, 3, 4, 3, 4}, b), (Ids{1, 3, 4, 3, 4, 11, 12, 13, 12}));
  // A test sequence: (3,6) and (6,3) were never seen in training and add nothing.
  EXPECT_EQ(add_bigrams({1, 3, 6, 3, 5}, b), (Ids{1, 3, 6, 3, 5, 11, 14}));
  EXPECT_EQ(add_bigrams({}, b), Ids{});
  EXPECT_EQ(add_bigrams({3}, b), (Ids{3}));
  EXPECT_EQ(build_bigrams({{1}, {}}, 10).vocab_size, 10);
  EXPECT_NE(bigram_key(1, 2), bigram_key(2, 1));
}

TEST(SequenceDataset, Get) {
  SequenceDataset ds({0, 5, 7, 1, 2, (1 << 24) - 1}, {1, 0}, 3);
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.sample_shape(), loupe::Shape{3});
  float x[3];
  int32_t y = -1;
  ds.get(1, x, &y, 12345);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[2], 16777215.0f);
  EXPECT_EQ(y, 0);
  ds.get(0, x, &y, 0);
  EXPECT_EQ(x[1], 5.0f);
  EXPECT_EQ(y, 1);
  expect_error([&] { ds.get(2, x, &y, 0); }, "out of range");
  expect_error([] { SequenceDataset({0, 1 << 24, 0}, {1}, 3); }, "id 16777216", "position 1");
  expect_error([] { SequenceDataset({0, -1, 0}, {1}, 3); }, "id -1");
  expect_error([] { SequenceDataset({0, 1, 0, 4}, {1}, 3); }, "4 ids do not make 1 sequences of 3");
}

class Imdb : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("loupe_text_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    const fs::path a = root_ / "aclImdb";
    // Written out of name order, so that the reader's sort is what puts them in order.
    write_file(a / "train/neg/1_2.txt", kTrainNeg12);
    write_file(a / "train/neg/0_1.txt", kTrainNeg01);
    write_file(a / "train/pos/2_7.txt", kTrainPos27);
    write_file(a / "train/pos/10_8.txt", kTrainPos108);
    write_file(a / "train/pos/notes.md", "not a review");
    write_file(a / "train/unsup/0_0.txt", "Unlabelled, ignored.");
    write_file(a / "test/neg/0_3.txt", kTestNeg);
    write_file(a / "test/pos/0_10.txt", kTestPos);
    write_file(a / "imdb.vocab", "the\nand\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(Imdb, ReadsLayout) {
  for (const fs::path& d : {root_, root_ / "aclImdb"}) {  // the parent or the folder itself
    const ImdbText t = load_aclimdb(d.string());
    EXPECT_EQ(t.dir, (root_ / "aclImdb").string());
    EXPECT_EQ(t.train_text, (Words{kTrainNeg01, kTrainNeg12, kTrainPos108, kTrainPos27}));
    EXPECT_EQ(t.train_labels, (std::vector<uint8_t>{0, 0, 1, 1}));
    EXPECT_EQ(t.test_text, (Words{kTestNeg, kTestPos}));
    EXPECT_EQ(t.test_labels, (std::vector<uint8_t>{0, 1}));
  }
}

TEST_F(Imdb, Errors) {
  expect_error([&] { load_aclimdb((root_ / "nowhere").string()); }, (root_ / "nowhere").string(), "fetch.sh imdb");
  fs::remove_all(root_ / "aclImdb/test/pos");
  expect_error([&] { load_aclimdb(root_.string()); }, (root_ / "aclImdb/test/pos").string(), "folder not found");
  fs::create_directories(root_ / "aclImdb/test/pos");
  write_file(root_ / "aclImdb/test/pos/readme", "no reviews here");
  expect_error([&] { load_aclimdb(root_.string()); }, (root_ / "aclImdb/test/pos").string(), "no .txt");
}

// docs/fuzzing.md, "Size caps": one 200 MB review took 4.5 GB (the tokenizer holds a string per
// word). A review is read only when its size (stat) is within 1 MiB: exactly 1 MiB is read, a byte
// more is refused, and a 1.5 GB one ends with that error in a child allowed 1 GiB more address
// space (the reader read it whole, which ran out of memory there).
TEST_F(Imdb, AReviewOverItsCapIsRefusedBeforeReading) {
  const fs::path big = root_ / "aclImdb/train/pos/5_9.txt";
  sparse_file(big, 1 << 20);
  EXPECT_EQ(load_aclimdb(root_.string()).train_text.at(4).size(), size_t(1) << 20);
  const std::string refused = " bytes, more than the 1,048,576 (1 MiB) loupe reads for one review (aclImdb's longest "
                              "is about 14 KB): not a review; remove it from the folder";
  sparse_file(big, (1 << 20) + 1);
  expect_error([&] { load_aclimdb(root_.string()); }, big.string() + ": 1,048,577" + refused);
  sparse_file(big, uint64_t(1536) << 20);
  EXPECT_EQ(loupe::test::run_with_memory_limit([&] { load_aclimdb(root_.string()); }),
            "error: " + big.string() + ": 1,610,612,736" + refused);
}

// All four folders together: their sizes are summed before any review is read, and more than
// 128 MiB (aclImdb's are 65 MB) is refused, naming the aclImdb folder.
TEST_F(Imdb, ReviewsOverTheCorpusCapAreRefusedBeforeReading) {
  for (int i = 0; i < 129; ++i) sparse_file(root_ / "aclImdb/test/neg" / (std::to_string(i) + "_1.txt"), 1 << 20);
  const std::string got = loupe::test::run_with_memory_limit([&] { load_aclimdb(root_.string()); });
  EXPECT_EQ(got.rfind("error: " + (root_ / "aclImdb").string() + ": its four review folders hold 135,266,", 0), 0u)
      << got;
  EXPECT_NE(got.find(" bytes, more than the 134,217,728 (128 MiB) loupe reads (aclImdb's 50,000 reviews are about "
                     "65 MB): not the IMDb reviews; pass --data with the aclImdb folder"),
            std::string::npos)
      << got;
}

// A corpus of nothing but distinct words (inside the size caps) would take gigabytes to count:
// more than 1,000,000 distinct training words is refused, within one review of the cap.
TEST_F(Imdb, TooManyDistinctWordsAreRefused) {
  ImdbText t;
  t.dir = "/some/aclImdb";
  int64_t next = 0;
  for (int doc = 0; doc < 12; ++doc) {  // 12 x 100,000 distinct words of 8 letters
    std::string text;
    for (int w = 0; w < 100000; ++w, ++next) {
      std::string word(8, 'a');
      for (int64_t v = next, k = 7; k >= 0; --k, v /= 26) word[size_t(k)] = char('a' + v % 26);
      text += word + " ";
    }
    t.train_text.push_back(text);
    t.train_labels.push_back(uint8_t(doc % 2));
  }
  t.test_text = {"a b"};
  t.test_labels = {1};
  expect_error([&] { make_imdb_sequences(t, 20000, 80, false); },
               "/some/aclImdb: the training reviews hold more than 1,000,000 distinct words, the most loupe counts "
               "(aclImdb's hold 88,584): not the IMDb reviews, or damaged; pass --data with the aclImdb folder");
  t.train_text.resize(10);  // exactly 1,000,000: counted
  t.train_labels.resize(10);
  EXPECT_NE(make_imdb_sequences(t, 20000, 80, false).description.find("vocabulary 19,997 of 1,000,000 training words"),
            std::string::npos);
}

TEST_F(Imdb, Sequences) {
  const ImdbText t = load_aclimdb(root_.string());
  // num_words 8: bad 3, plot 4, good 5, acting 6, great 7, anything else 2. Encoded (before padding):
  //   train [1 3 2 3 6 3 4] [1 2 5 2 4 2 3] [1 2 5 5 2 7 6] [1 7 4]; test [1 3 2 3 6] [1 2 2 2 2 7]
  const ImdbSequences s = make_imdb_sequences(t, 8, 5, false);
  EXPECT_EQ(s.n_train, 4);
  EXPECT_EQ(s.n_test, 2);
  EXPECT_EQ(s.maxlen, 5);
  EXPECT_EQ(s.vocab_size, 8);
  EXPECT_EQ(s.train_x, (Ids{2, 3, 6, 3, 4, 5, 2, 4, 2, 3, 5, 5, 2, 7, 6, 0, 0, 1, 7, 4}));
  EXPECT_EQ(s.test_x, (Ids{1, 3, 2, 3, 6, 2, 2, 2, 2, 7}));
  EXPECT_EQ(s.train_y, (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(s.test_y, (std::vector<uint8_t>{0, 1}));
  EXPECT_NE(s.description.find("5 of 11 training words"), std::string::npos) << s.description;

  // Bigrams from 9 on, in order of first occurrence over the training sequences above:
  //   (1,3) 9 (3,2) 10 (2,3) 11 (3,6) 12 (6,3) 13 (3,4) 14 | (1,2) 15 (2,5) 16 (5,2) 17 (2,4) 18
  //   (4,2) 19 | (5,5) 20 (2,7) 21 (7,6) 22 | (1,7) 23 (7,4) 24. So V = 25.
  const ImdbSequences f = make_imdb_sequences(t, 8, 10, true);
  EXPECT_EQ(f.vocab_size, 25);
  EXPECT_EQ(Ids(f.train_x.begin() + 30, f.train_x.end()), (Ids{0, 0, 0, 0, 0, 1, 7, 4, 23, 24}));
  // Train review 1 [1 2 5 2 4 2 3] + 15 16 17 18 19 11: 13 ids, the last 10 kept.
  EXPECT_EQ(Ids(f.train_x.begin() + 10, f.train_x.begin() + 20), (Ids{2, 4, 2, 3, 15, 16, 17, 18, 19, 11}));
  // Test review 1 [1 2 2 2 2 7]: (1,2) 15 and (2,7) 21 are known, (2,2) is not.
  EXPECT_EQ(Ids(f.test_x.begin() + 10, f.test_x.end()), (Ids{0, 0, 1, 2, 2, 2, 2, 7, 15, 21}));
  EXPECT_NE(f.description.find("16 training bigrams"), std::string::npos) << f.description;
  // What checkpoints store of the ids (docs/data.md, "Checkpoints"): the words in id order, then
  // the bigrams.
  EXPECT_EQ(s.vocab_fingerprint.rfind("5 words ('bad', 'plot', 'good', ...), crc32 ", 0), 0u) << s.vocab_fingerprint;
  EXPECT_EQ(f.vocab_fingerprint.rfind(s.vocab_fingerprint + ", 16 bigrams, crc32 ", 0), 0u) << f.vocab_fingerprint;
  EXPECT_NE(make_imdb_sequences(t, 7, 5, false).vocab_fingerprint, s.vocab_fingerprint);

  SequenceDataset ds(s.train_x, std::vector<int32_t>(s.train_y.begin(), s.train_y.end()), s.maxlen);
  float x[5];
  int32_t y;
  ds.get(3, x, &y, 0);
  EXPECT_EQ(x[2], 1.0f);
  EXPECT_EQ(x[4], 4.0f);
  EXPECT_EQ(y, 1);
}

TEST_F(Imdb, DefaultDirs) {
  EnvVar data("LOUPE_DATA", (root_ / "ld").string()), home("HOME", (root_ / "home").string());
  EXPECT_EQ(default_imdb_dirs(), (Words{(root_ / "ld/imdb").string(), (root_ / "home/.cache/loupe/imdb").string(),
                                        "data/imdb"}));
  // (A data/imdb in the working directory would be found last; the test does not rely on its absence.)
  fs::create_directories(root_ / "home/.cache/loupe");
  fs::rename(root_ / "aclImdb", root_ / "home/.cache/loupe/imdb");  // the folders themselves, no aclImdb/
  EXPECT_EQ(find_default_imdb_dir(), (root_ / "home/.cache/loupe/imdb").string());
  fs::create_directories(root_ / "ld/imdb");
  fs::rename(root_ / "home/.cache/loupe/imdb", root_ / "ld/imdb/aclImdb");
  EXPECT_EQ(find_default_imdb_dir(), (root_ / "ld/imdb").string());
  EXPECT_EQ(load_aclimdb(*find_default_imdb_dir()).train_text.size(), 4u);
}

TEST(Utf8, RoundTrip) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  const std::vector<char32_t> cps = decode_utf8(s, "t");
  EXPECT_EQ(cps, (std::vector<char32_t>{0x61, 0xE9, 0x20AC, 0x1F600}));
  std::string back;
  for (char32_t c : cps) append_utf8(c, &back);
  EXPECT_EQ(back, s);
  expect_error([] { decode_utf8("ab\xC3(", "t"); }, "byte offset 2", "0x28");
  expect_error([] { decode_utf8("\xFF", "t"); }, "byte offset 0", "0xff");
  expect_error([] { decode_utf8("abc\xE2\x82", "t"); }, "byte offset 3", "ends inside");
  expect_error([] { decode_utf8("x\xC0\xAF", "t"); }, "byte offset 1", "overlong");
  expect_error([] { decode_utf8("\xED\xA0\x80", "t"); }, "U+D800", "not a Unicode scalar");
  expect_error([] { decode_utf8("\xF4\x90\x80\x80", "t"); }, "U+110000");
}

TEST(CharCorpus, ShortText) {
  // "Abé abé!" lower-cased: a b é ' ' a b é ! (8 code points, 10 bytes).
  // Sorted characters: ' ' 0, '!' 1, 'a' 2, 'b' 3, 'é' 4.
  const CharCorpus c = CharCorpus::from_text("Ab\xC3\xA9 ab\xC3\xA9!");
  EXPECT_EQ(c.chars(), (std::vector<char32_t>{U' ', U'!', U'a', U'b', 0xE9}));
  EXPECT_EQ(c.ids(), (Ids{2, 3, 4, 0, 2, 3, 4, 1}));
  EXPECT_EQ(c.length(), 8);
  EXPECT_EQ(c.vocab_size(), 5);
  EXPECT_EQ(c.id(0xE9), 4);
  EXPECT_EQ(c.id(U'A'), -1);
  EXPECT_EQ(c.id(U'z'), -1);
  // Window 3, step 2: starts 0, 2, 4 (4 + 3 < 8; 6 + 3 is not).
  EXPECT_EQ(c.num_windows(3, 2), 3);
  EXPECT_EQ(c.window(0, 3, 2), (Ids{2, 3, 4}));
  EXPECT_EQ(c.target(0, 3, 2), 0);
  EXPECT_EQ(c.window(1, 3, 2), (Ids{4, 0, 2}));
  EXPECT_EQ(c.target(1, 3, 2), 3);
  EXPECT_EQ(c.window(2, 3, 2), (Ids{2, 3, 4}));
  EXPECT_EQ(c.target(2, 3, 2), 1);
  expect_error([&] { c.window(3, 3, 2); }, "window 3 is out of range for 3");
  EXPECT_EQ(c.num_windows(7, 1), 1);
  EXPECT_EQ(c.num_windows(8, 1), 0);
  EXPECT_EQ(c.num_windows(), 0);
  EXPECT_EQ(c.decode(c.ids()), "ab\xC3\xA9 ab\xC3\xA9!");
  EXPECT_EQ(c.decode({4, 1}), "\xC3\xA9!");
  expect_error([&] { c.decode({5}); }, "id 5");
  EXPECT_EQ(c.encode("B\xC3\xA9 A"), (Ids{3, 4, 0, 2}));
  expect_error([&] { c.encode("bz"); }, "'z'", "U+007A");
  expect_error([] { CharCorpus::from_text("ok\x80"); }, "byte offset 2");

  CharWindowDataset ds(c, 3, 2);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.sample_shape(), loupe::Shape{3});
  EXPECT_EQ(ds.num_classes(), 5);
  float x[3];
  int32_t y = -1;
  ds.get(1, x, &y, 7);
  EXPECT_EQ(x[0], 4.0f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[2], 2.0f);
  EXPECT_EQ(y, 3);
  expect_error([&] { CharWindowDataset w(c); }, "8 characters", "window of 40");
}

TEST(CharCorpus, FromFile) {
  const fs::path d = fs::temp_directory_path() / ("loupe_text_chars_" + std::to_string(getpid()));
  fs::remove_all(d);
  write_file(d / "ok.txt", "Hi\nhi");
  const CharCorpus c = CharCorpus::from_file((d / "ok.txt").string());
  EXPECT_EQ(c.ids(), (Ids{1, 2, 0, 1, 2}));  // '\n' 0, 'h' 1, 'i' 2
  write_file(d / "bad.txt", "caf\xE9");       // Latin-1 é
  expect_error([&] { CharCorpus::from_file((d / "bad.txt").string()); }, (d / "bad.txt").string(), "byte offset 3");
  write_file(d / "empty.txt", "");
  expect_error([&] { CharCorpus::from_file((d / "empty.txt").string()); }, (d / "empty.txt").string(), "empty");
  expect_error([&] { CharCorpus::from_file((d / "none.txt").string()); }, (d / "none.txt").string(), "not found");

  EnvVar data("LOUPE_DATA", (d / "ld").string()), home("HOME", (d / "home").string());
  EXPECT_EQ(default_nietzsche_paths(), (Words{(d / "ld/nietzsche/nietzsche.txt").string(),
                                              (d / "home/.cache/loupe/nietzsche/nietzsche.txt").string(),
                                              "data/nietzsche/nietzsche.txt"}));
  write_file(d / "home/.cache/loupe/nietzsche/nietzsche.txt", "text");
  write_file(d / "ld/nietzsche/nietzsche.txt", "");  // empty: skipped
  EXPECT_EQ(find_default_nietzsche_path(), (d / "home/.cache/loupe/nietzsche/nietzsche.txt").string());
  fs::remove_all(d);
}

// docs/fuzzing.md, "Size caps": char_lstm's text is read only when its size (stat) is within
// 64 MiB; a 1.5 GB one ends with that error in a child allowed 1 GiB more address space (the
// reader read it whole first).
TEST(CharCorpus, TextOverItsCapIsRefusedBeforeReading) {
  const fs::path p = fs::temp_directory_path() / ("loupe_text_big_" + std::to_string(getpid()) + ".txt");
  const std::string refused = " bytes, more than the 67,108,864 (64 MiB) of text loupe reads for char_lstm (the "
                              "Nietzsche text is 600 KB): give a smaller text";
  sparse_file(p, (uint64_t(64) << 20) + 1);
  expect_error([&] { CharCorpus::from_file(p.string()); }, p.string() + ": 67,108,865" + refused);
  sparse_file(p, uint64_t(1536) << 20);
  EXPECT_EQ(loupe::test::run_with_memory_limit([&] { CharCorpus::from_file(p.string()); }),
            "error: " + p.string() + ": 1,610,612,736" + refused);
  fs::remove(p);
}

TEST(CharCorpus, EnglishText) {
  const std::string path = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const CharCorpus c = CharCorpus::from_file(path);
  bool ascii = true;
  for (char b : bytes) ascii = ascii && static_cast<unsigned char>(b) < 0x80;
  if (ascii) EXPECT_EQ(c.length(), int64_t(bytes.size()));
  EXPECT_GT(c.vocab_size(), 30);
  EXPECT_LT(c.vocab_size(), 100);
  for (char32_t ch : c.chars()) EXPECT_FALSE(ch >= U'A' && ch <= U'Z') << "upper-case letter " << char(ch);
  EXPECT_TRUE(c.id(U'e') >= 0 && c.id(U'\n') >= 0 && c.id(U' ') >= 0);
  const int64_t n = c.num_windows();
  EXPECT_EQ(n, (c.length() - 41) / 3 + 1);
  EXPECT_LT((n - 1) * 3 + 40, c.length());   // the last window's target exists
  EXPECT_GE(n * 3 + 40, c.length());         // and the next window would have none
  CharWindowDataset ds(c);
  EXPECT_EQ(ds.size(), n);
  float x[40];
  int32_t y;
  ds.get(n - 1, x, &y, 0);
  EXPECT_EQ(y, c.ids()[size_t((n - 1) * 3 + 40)]);
  EXPECT_EQ(x[0], float(c.ids()[size_t((n - 1) * 3)]));
  EXPECT_EQ(c.decode(c.window(0)), [&] {
    std::string s = bytes.substr(0, 40);
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  }());
}
