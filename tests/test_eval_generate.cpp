// `loupe eval` and `loupe generate` through the command (docs/data.md, "Checkpoints"): a char_lstm
// checkpoint stores its character table and is refused, in one sentence, with a text of other
// characters (it used to generate garbage with exit 0 when the count matched); generate needs no
// corpus with --prompt; a checkpoint without a table (an older loupe's) still loads, saying so; and
// Ctrl-C ends both within a second with status 130, generate having printed its text so far.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "loupe.h"
#include "models/session.h"
#include "train/checkpoint_file.h"
#include "test_util.h"

using namespace loupe;

namespace {

std::pair<int, std::string> run_cli(const std::string& args) {
  return test::run_command(std::string(LOUPE_CLI) + " " + args);
}

// A text of n characters drawn from `alphabet` (every one of them occurs).
std::string text_of(const std::string& alphabet, size_t n) {
  std::string t;
  for (size_t i = 0; i < n; ++i) t += alphabet[(i * 7 + i / 5) % alphabet.size()];
  return t;
}

// Corpus A and B: 3,000 characters each, 13 distinct each, but other ones; and a checkpoint of one
// training step on A (made once for the file's tests).
struct Files {
  std::filesystem::path dir = test::temp_path("loupe_eval_generate");
  std::string a = (dir / "a.txt").string(), b = (dir / "b.txt").string(), ckpt = (dir / "a.ckpt").string();
  std::string train_out;
  int train_rc = -1;
  Files() {
    std::filesystem::create_directories(dir);
    std::ofstream(a) << text_of("abcdefghij .\n", 3000);
    std::ofstream(b) << text_of("klmnopqrst ,\n", 3000);
    std::tie(train_rc, train_out) = run_cli("train char_lstm --device cpu --plain --no-nvml --max-steps 1 --epochs 1 "
                                            "--data " + a + " --save " + ckpt);
  }
  ~Files() { std::filesystem::remove_all(dir); }
};

const Files& files() {
  static Files f;
  return f;
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

}  // namespace

TEST(CharTable, RoundTripsThroughTheCheckpoint) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  const train::CheckpointMeta m = train::read_checkpoint_meta(f.ckpt, "char_lstm");
  EXPECT_EQ(m.chars, "\n .abcdefghij");  // sorted code points, in id order
  // And through save/load with characters of several bytes and the word fingerprint.
  nn::Sequential net;
  net.add("fc", std::make_shared<nn::Linear>(2, 2));
  const std::string p = (f.dir / "rt.ckpt").string();
  train::save_checkpoint(p, net, nullptr, {"tiny", 1, 2, 3, "\n ab\xc3\xa9\xe2\x82\xac", "3 words ('a', ...), crc32 1"});
  const train::CheckpointMeta r = train::load_checkpoint(p, net, nullptr, "tiny");
  EXPECT_EQ(r.chars, "\n ab\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(r.words, "3 words ('a', ...), crc32 1");
}

TEST(CharTable, ACorpusOfOtherCharactersIsRefused) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  const std::string sentence = "loupe: checkpoint '" + f.ckpt + "' was trained on a text of 13 characters " +
                               "('\\n .abcdefghij'), this corpus has 13 ('\\n ,klmnopqrst'): it adds ',', 'k'";
  for (const std::string& cmd : {"eval char_lstm --device cpu --checkpoint " + f.ckpt + " --data " + f.b,
                                 "generate char_lstm --device cpu --length 5 --checkpoint " + f.ckpt + " --data " + f.b,
                                 "train char_lstm --device cpu --plain --no-nvml --max-steps 1 --epochs 2 --resume " +
                                     f.ckpt + " --data " + f.b}) {
    auto [rc, out] = run_cli(cmd);
    EXPECT_EQ(rc, 1) << cmd << "\n" << out;
    EXPECT_EQ(out.rfind(sentence, 0), 0u) << cmd << "\n" << out;
    EXPECT_HAS(out, "so its character ids would mean other characters; give the text it was trained on");
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line:\n" << out;
  }
}

TEST(CharTable, TheTrainingCorpusWorksAndGenerateNeedsNoneWithAPrompt) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  auto [rc, out] = run_cli("eval char_lstm --device cpu --checkpoint " + f.ckpt + " --data " + f.a);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "test accuracy");
  std::tie(rc, out) = run_cli("generate char_lstm --device cpu --length 30 --checkpoint " + f.ckpt + " --data " + f.a);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "prompt (40 characters)");
  // The checkpoint's table alone: no corpus is read (nor searched for).
  std::tie(rc, out) = run_cli("generate char_lstm --device cpu --length 30 --prompt 'abc de' --checkpoint " + f.ckpt);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "prompt (6 characters): abc de\n---\nabc de");
  EXPECT_EQ(out.size(), std::string("prompt (6 characters): abc de\n---\nabc de").size() + 30 + 1) << out;
}

// A checkpoint written before tables were stored: it loads, and a note says nothing was checked.
TEST(CharTable, ACheckpointWithoutATableLoadsWithANote) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  CheckpointFile old = read_checkpoint_file(f.ckpt);
  old.meta.erase(std::remove_if(old.meta.begin(), old.meta.end(), [](const auto& kv) { return kv.first == "chars"; }),
                 old.meta.end());
  const std::string p = (f.dir / "old.ckpt").string();
  write_checkpoint_file(p, old);
  auto [rc, out] = run_cli("eval char_lstm --device cpu --checkpoint " + p + " --data " + f.a);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "loupe: note: checkpoint '" + p + "' stores no character table");
  EXPECT_HAS(out, "could not be checked");
  EXPECT_HAS(out, "test accuracy");
  // generate has no table to decode with, so it reads the corpus even with --prompt.
  std::tie(rc, out) = run_cli("generate char_lstm --device cpu --length 10 --prompt abc --checkpoint " + p + " --data " + f.a);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_HAS(out, "could not be checked");
}

namespace {
// `loupe ARGS` in the background (tests/test_util.h's CliChild).
struct Child : test::CliChild {
  explicit Child(const std::string& args, const std::string& prefix = "")
      : test::CliChild(std::string(LOUPE_CLI) + " " + args, prefix) {}
};
}  // namespace

// Ctrl-C in generate: status 130 within a second, and the text made so far is on stdout (it used
// to be lost: the text was printed only at the end).
TEST(CtrlC, GenerateStopsWithItsTextPrinted) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  Child c("generate char_lstm --device cpu --length 1000000 --prompt abc --checkpoint " + f.ckpt);
  const std::string head = "prompt (3 characters): abc\n---\nabc";
  ASSERT_TRUE(c.wait_for(head, 60)) << c.text;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // some characters come
  auto [rc, took] = c.interrupt();
  EXPECT_EQ(rc, 130) << c.text;
  EXPECT_LT(took, 1.5) << c.text;
  const size_t at = c.text.find(head), end = c.text.find("\nloupe: interrupted after ");
  ASSERT_NE(at, std::string::npos) << c.text;
  ASSERT_NE(end, std::string::npos) << c.text;
  const std::string made = c.text.substr(at + head.size(), end - at - head.size());
  EXPECT_GT(made.size(), 0u) << c.text;
  EXPECT_HAS(c.text, "loupe: interrupted after " + std::to_string(made.size()) + " of 1000000 characters");
  EXPECT_EQ(made.find_first_not_of("\n .abcdefghij"), std::string::npos) << "only the table's characters:\n" << c.text;
}

// Ctrl-C in eval: status 130 within a second, a line that says so, and no accuracy. Where the run
// is comes from its NVTX ranges (tests/nvtx_recorder.cpp), as test_train's Ctrl-C test does.
TEST(CtrlC, EvalStopsWithoutAnAccuracy) {
  const Files& f = files();
  ASSERT_EQ(f.train_rc, 0) << f.train_out;
  // 50,000 held-out windows on one core: seconds of evaluation.
  const std::string big = (f.dir / "big.txt").string(), log = (f.dir / "nvtx.log").string();
  std::ofstream(big) << text_of("abcdefghij .\n", 3000000);
  test::EnvVar inject("NVTX_INJECTION64_PATH", LOUPE_NVTX_RECORDER), to_log("LOUPE_NVTX_LOG", log);
  Child c("eval char_lstm --device cpu --checkpoint " + f.ckpt + " --data " + big, "taskset -c 0 ");
  bool evaluating = false;
  for (int i = 0; i < 6000 && !evaluating; ++i) {
    evaluating = ("\n" + test::slurp(log)).find("\nevaluation\t") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  c.drain();
  ASSERT_TRUE(evaluating) << "no evaluation within 60 s:\n" << c.text;
  auto [rc, took] = c.interrupt();
  EXPECT_EQ(rc, 130) << c.text;
  EXPECT_LT(took, 1.5) << c.text;
  // Between batches the evaluation reads the flag and says where it stopped; a batch that takes
  // longer than the signal's grace (one loaded core, CI's) is cut short by the watchdog, which
  // says only that: either way status 130 and no accuracy.
  const bool clean = c.text.find("interrupted while evaluating " + f.ckpt + ": no test accuracy\n") != std::string::npos;
  EXPECT_TRUE(clean || c.text.find("loupe: interrupted\n") != std::string::npos) << c.text;
  EXPECT_EQ(c.text.find("test accuracy "), std::string::npos) << "the evaluation finished first:\n" << c.text;
}
