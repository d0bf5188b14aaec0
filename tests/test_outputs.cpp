// Every file a command writes is checked before any data is loaded or step run (issue 32, item 5):
// a --trace into a missing directory had failed only when its window closed, minutes into the run.
// And a write that fails mid-run ends with one sentence naming the file and the reason, status 1.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "test_util.h"

using namespace loupe;
namespace fs = std::filesystem;

namespace {

const std::string kCli = LOUPE_CLI;
const std::string kQuick = " --device cpu --plain --no-nvml --synthetic --epochs 1 --max-steps 1";

// What check_output_file threw, or "" when it passed.
std::string refusal(const std::string& path, const std::string& option = "--csv") {
  try {
    check_output_file(path, option);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// The names in a directory: the checks must leave nothing behind.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

// A command run as an unprivileged user where the tests run as root (root writes into a read-only
// directory regardless); "" where that cannot be done here.
std::string unprivileged() {
  if (geteuid() != 0) return " ";
  if (std::system("command -v setpriv > /dev/null 2>&1") != 0) return "";
  return " setpriv --reuid=65534 --regid=65534 --clear-groups -- ";
}

}  // namespace

TEST(OutputCheck, PassesWithoutChangingAnything) {
  const fs::path dir = test::temp_path("loupe_out_ok");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path kept = dir / "kept.jsonl";
  std::ofstream(kept) << "{\"epoch\":1}\n";
  EXPECT_EQ(refusal(kept.string()), "");
  EXPECT_EQ(refusal((dir / "new.csv").string()), "");
  EXPECT_EQ(test::slurp(kept), "{\"epoch\":1}\n") << "an existing file is not truncated by the check";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"kept.jsonl"}) << "the probe left a file";
  check_output_directory((dir / "tb" / "run1").string(), "--tensorboard");  // created later, by the writer
  EXPECT_FALSE(fs::exists(dir / "tb"));
  fs::remove_all(dir);
}

TEST(OutputCheck, SaysWhyInOneSentence) {
  const fs::path file = test::temp_path("loupe_out_file");
  std::ofstream(file) << "x";
  EXPECT_EQ(refusal("/nonexistent-loupe-dir/t.json", "--trace"),
            "--trace: cannot write '/nonexistent-loupe-dir/t.json': its directory does not exist");
  EXPECT_EQ(refusal((file / "x.csv").string()),
            "--csv: cannot write '" + (file / "x.csv").string() + "': '" + file.string() +
                "' is a regular file, not a directory");
  EXPECT_EQ(refusal(fs::temp_directory_path().string()),
            "--csv: cannot write '" + fs::temp_directory_path().string() +
                "': it is a directory; give the path of a regular file (it is created or replaced)");
  EXPECT_EQ(refusal("/dev/null", "--metrics"),
            "--metrics: cannot write '/dev/null': it is a character device; give the path of a regular file (it is "
            "created or replaced)");
  try {
    check_output_directory((file / "tb").string(), "--tensorboard");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--tensorboard: cannot write '" + (file / "tb").string() + "': '" +
                                         file.string() + "' is a regular file, not a directory");
  }
  fs::remove(file);
}

// Each output option of each command that writes files, into a missing directory: refused before
// anything else, so the whole output is the one sentence (no header, no epoch, no table).
TEST(OutputCheck, EveryCommandRefusesAMissingDirectoryAtStart) {
  const std::string bad = "/nonexistent-loupe-dir/out";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"train mnist_mlp" + kQuick + " --metrics " + bad, "--metrics"},
      {"train mnist_mlp" + kQuick + " --csv " + bad, "--csv"},
      {"train mnist_mlp" + kQuick + " --trace " + bad, "--trace"},
      {"train mnist_mlp" + kQuick + " --timeline " + bad, "--timeline"},
      {"profile mnist_mlp --device cpu --synthetic --csv " + bad, "--csv"},
      {"profile mnist_mlp --device cpu --synthetic --json " + bad, "--json"},
      {"profile mnist_mlp --device cpu --synthetic --png " + bad, "--png"},
      {"bench mnist_mlp --device cpu --batch 8 --steps 1 --json " + bad, "--json"},
      {"bench mnist_mlp --device cpu --batch 8 --steps 1 --csv " + bad, "--csv"},
      {"sweep mnist_mlp --device cpu --batch 8 --steps 1 --csv " + bad, "--csv"},
      {"sweep mnist_mlp --device cpu --batch 8 --steps 1 --png " + bad, "--png"},
      {"roofline --device cpu --sizes 64 --csv " + bad, "--csv"},
      {"roofline --device cpu --sizes 64 --png " + bad, "--png"},
      {"compare a.jsonl b.jsonl --csv " + bad, "--csv"},
      {"compare a.jsonl b.jsonl --plot " + bad, "--plot"},
  };
  for (const auto& [args, option] : cases) {
    auto [rc, out] = test::run_command("timeout 60 " + kCli + " " + args);
    EXPECT_EQ(rc, 1) << args << "\n" << out;
    EXPECT_EQ(out, "loupe: " + option + ": cannot write '" + bad + "': its directory does not exist\n") << args;
  }
  // --tensorboard creates its directory, so the refusal is of a parent that cannot hold one.
  auto [rc, out] = test::run_command("timeout 60 " + kCli + " train mnist_mlp" + kQuick + " --tensorboard /etc/passwd/tb");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "loupe: --tensorboard: cannot write '/etc/passwd/tb': '/etc/passwd' is a regular file, not a "
                 "directory\n");
}

// A directory that takes no new file, and an existing file that cannot be written: refused at the
// start too, the directory by a probe (a file created and removed beside the output).
TEST(OutputCheck, ReadOnlyDirectoryAndFileAreRefusedAtStart) {
  const std::string as_user = unprivileged();
  if (as_user.empty()) GTEST_SKIP() << "running as root without setpriv: a read-only directory refuses nobody";
  const fs::path dir = test::temp_path("loupe_out_ro");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path metrics = dir / "m.jsonl";
  std::ofstream(metrics) << "";
  fs::permissions(metrics, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string trace = (dir / "t.json").string();
  auto [rc, out] = test::run_command("timeout 60" + as_user + kCli + " train mnist_mlp" + kQuick + " --trace " + trace);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "loupe: --trace: cannot write '" + trace + "': its directory '" + dir.string() +
                     "' takes no new file (Permission denied)\n");
  std::tie(rc, out) =
      test::run_command("timeout 60" + as_user + kCli + " train mnist_mlp" + kQuick + " --metrics " + metrics.string());
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "loupe: --metrics: cannot write '" + metrics.string() + "': Permission denied\n");
  // A default output (roofline.csv in the working directory) is checked as well.
  std::tie(rc, out) =
      test::run_command("cd '" + dir.string() + "' && timeout 60" + as_user + kCli + " roofline --device cpu --sizes 64");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "loupe: --csv (default): cannot write 'roofline.csv': its directory '.' takes no new file "
                 "(Permission denied)\n");
  fs::permissions(dir, fs::perms::owner_all);
  fs::remove_all(dir);
}

// A --metrics write that fails mid-run (the file size limit: a full disk alike): the epoch ran, then
// one sentence naming the option, the file and the reason, status 1; no second epoch, no dump.
TEST(OutputCheck, MetricsWriteFailingMidRunIsOneSentence) {
  const fs::path metrics = test::temp_path("loupe_out_full.jsonl");
  std::ofstream(metrics) << std::string(64 * 1024, 'x');  // at the limit below: the next byte is refused
  auto [rc, out] = test::run_command("ulimit -f 64 && timeout 120 " + kCli + " train mnist_mlp --device cpu --plain "
                                     "--no-nvml --synthetic --epochs 2 --max-steps 2 --metrics " + metrics.string());
  EXPECT_EQ(rc, 1) << out;  // 153 (SIGXFSZ) without loupe_main's SIG_IGN
  EXPECT_NE(out.find("epoch 1/2"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 2/2"), std::string::npos) << out;
  const std::string said = "loupe: --metrics: cannot write '" + metrics.string() + "': File too large\n";
  ASSERT_GE(out.size(), said.size()) << out;
  EXPECT_EQ(out.substr(out.size() - said.size()), said) << out;
  EXPECT_EQ(out.find("loupe:"), out.size() - said.size()) << "one sentence:\n" << out;
  fs::remove(metrics);
}
