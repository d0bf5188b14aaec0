// Every file a command writes is checked before any data is loaded or step run
// (docs/reliability.md): a --trace into a missing directory had failed only when its window closed,
// minutes into the run. And a write that fails mid-run ends with one sentence naming the file and
// the reason, status 1.
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

namespace {

// An input of the run, as the command line names it, and how the refusal describes it.
struct InputKind {
  std::string args;   // the words that name it (a model, --data, --resume, compare's files)
  std::string path;   // the input file (or a file inside the input folder)
  std::string said;   // the refusal's words for it, after "is "
};

}  // namespace

// No output may replace an input (docs/cli.md, "Inputs and outputs"): every output
// option of every command that writes files, against every kind of input the command reads (the
// model file, a --data file, a file in a --data folder, the default data folder, the --resume
// checkpoint, compare's runs), compared by device and inode, not by spelling (a ./x/../ spelling, a
// symbolic link, a hard link). Refused at start, status 2, naming both and the path; the input is
// unchanged. `--save model.json` replaced the model file; `--csv data/x_train.npy` the data.
TEST(OutputCheck, NoOutputNamesAnInput) {
  const fs::path dir = test::temp_path("loupe_out_inputs");
  fs::remove_all(dir);
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "home" / "mnist");
  const std::string d = dir.string();
  for (const char* f : {"model.json", "data.npz", "data/x_train.npy", "data/y_train.npy", "ck.ckpt", "a.jsonl",
                        "b.jsonl", "home/mnist/train-images-idx3-ubyte", "home/mnist/train-labels-idx1-ubyte",
                        "home/mnist/t10k-images-idx3-ubyte", "home/mnist/t10k-labels-idx1-ubyte"})
    std::ofstream(dir / f) << "input " << f;
  fs::create_symlink(dir / "model.json", dir / "link.json");
  fs::create_hard_link(dir / "data.npz", dir / "hard.npz");
  // Each kind, and the outputs that would replace it spelt three ways.
  const InputKind model{"train " + d + "/model.json", d + "/model.json", "the model file '" + d + "/model.json'"};
  const InputKind npz{"train mnist_mlp --data " + d + "/data.npz", d + "/data.npz",
                      "the --data file '" + d + "/data.npz'"};
  const InputKind folder{"train mnist_mlp --data " + d + "/data", d + "/data/x_train.npy",
                         "inside the --data folder '" + d + "/data'"};
  const InputKind fallback{"train mnist_mlp", d + "/home/mnist/train-images-idx3-ubyte",
                           "inside the data folder '" + d + "/home/mnist'"};
  const InputKind fallback_synthetic{"train mnist_mlp --synthetic", fallback.path, fallback.said};  // read or not
  const InputKind resume{"train mnist_mlp --resume " + d + "/ck.ckpt", d + "/ck.ckpt",
                         "the --resume checkpoint '" + d + "/ck.ckpt'"};
  auto spelt = [&](const std::string& path, int i) {
    if (path == d + "/model.json" && i % 3 == 1) return d + "/link.json";
    if (path == d + "/data.npz" && i % 3 == 1) return d + "/hard.npz";
    const std::string rest = path.substr(d.size());
    return i % 3 == 0 ? path : d + "/data/.." + rest;
  };
  struct Case {
    std::string command, option;
    const InputKind* input;
  };
  std::vector<Case> cases;
  for (const InputKind* in : {&model, &npz, &folder, &fallback, &fallback_synthetic, &resume})
    for (const char* out : {"save", "metrics", "csv", "trace", "timeline", "tensorboard"})
      if (!(in == &resume && std::string(out) == "save")) cases.push_back({"train", out, in});
  const InputKind pmodel{"profile " + d + "/model.json", model.path, model.said};
  const InputKind pfolder{"profile mnist_mlp --data " + d + "/data", folder.path, folder.said};
  const InputKind pnpz{"profile mnist_mlp --data " + d + "/data.npz", npz.path, npz.said};
  const InputKind pfallback{"profile mnist_mlp", fallback.path, fallback.said};
  for (const InputKind* in : {&pmodel, &pfolder, &pnpz, &pfallback})
    for (const char* out : {"csv", "json", "png"}) cases.push_back({"profile", out, in});
  const InputKind bmodel{"bench " + d + "/model.json", model.path, model.said};
  const InputKind bmodels{"bench mnist_mlp," + d + "/model.json", model.path, model.said};
  const InputKind smodel{"sweep " + d + "/model.json --batch 8", model.path, model.said};
  const InputKind bfallback{"bench mnist_mlp --batch 8", fallback.path, fallback.said};
  for (const char* out : {"json", "csv"}) cases.push_back({"bench", out, out[0] == 'j' ? &bmodel : &bmodels});
  cases.push_back({"bench", "csv", &bfallback});
  for (const char* out : {"csv", "png"}) cases.push_back({"sweep", out, &smodel});
  const InputKind runs{"compare " + d + "/a.jsonl " + d + "/b.jsonl", d + "/b.jsonl",
                       "the input '" + d + "/b.jsonl'"};
  for (const char* out : {"csv", "plot"}) cases.push_back({"compare", out, &runs});
  const std::string env = "env LOUPE_DATA=" + d + "/home ";
  int i = 0;
  for (const Case& c : cases) {
    const std::string target = spelt(c.input->path, i++);
    const std::string args = c.input->args + (c.command == "compare" ? "" : " --device cpu") + " --" + c.option + " " +
                             target;
    auto [rc, out] = test::run_command("timeout 60 " + env + kCli + " " + args);
    EXPECT_EQ(rc, 2) << args << "\n" << out;
    EXPECT_EQ(out, "loupe: --" + c.option + " '" + target + "' is " + c.input->said +
                       ": loupe does not write over its inputs; give --" + c.option + " another path\n")
        << args;
  }
  // --tensorboard is a folder of new files: not the data folder either, nor inside it.
  for (const std::string& tb : {d + "/data", d + "/data/tb"}) {
    fs::create_directories(d + "/data/tb");
    auto [rc, out] = test::run_command("timeout 60 " + kCli + " " + folder.args + " --device cpu --tensorboard " + tb);
    EXPECT_EQ(rc, 2) << tb << "\n" << out;
    EXPECT_EQ(out, "loupe: --tensorboard '" + tb + "' is " + (tb == d + "/data" ? "the --data folder '" + d + "/data'"
                                                                                   : folder.said) +
                       ": loupe does not write over its inputs; give --tensorboard another path\n");
  }
  for (const char* f : {"model.json", "data.npz", "data/x_train.npy", "ck.ckpt", "b.jsonl",
                        "home/mnist/train-images-idx3-ubyte"})
    EXPECT_EQ(test::slurp(dir / f), std::string("input ") + f) << f << " was changed";
  // A new file beside the inputs is no input: it passes this check (and fails later, on the data).
  auto [rc, out] = test::run_command("timeout 60 " + kCli + " " + folder.args + " --device cpu --plain --no-nvml "
                                     "--metrics " + d + "/data/new.jsonl --save " + d + "/new.ckpt");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out.find("does not write over"), std::string::npos) << out;
  // The same files again, now that they exist: a second run is judged as the first. A data file's
  // name in the folder, or a path in a folder of it, is refused whether it exists yet or not.
  std::ofstream(d + "/data/new.jsonl") << "{}\n";
  auto [rc2, out2] = test::run_command("timeout 60 " + kCli + " " + folder.args + " --device cpu --plain --no-nvml "
                                       "--metrics " + d + "/data/new.jsonl");
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_EQ(out2.find("does not write over"), std::string::npos) << out2;
  fs::create_directories(d + "/data/class_a");
  for (const std::string& p : {d + "/data/x_test.npy", d + "/data/class_a/new.csv"}) {
    auto [rc3, out3] = test::run_command("timeout 60 " + kCli + " " + folder.args + " --device cpu --csv " + p);
    EXPECT_EQ(rc3, 2) << p << "\n" << out3;
    EXPECT_EQ(out3, "loupe: --csv '" + p + "' is " + folder.said +
                        ": loupe does not write over its inputs; give --csv another path\n");
  }
  fs::remove_all(dir);
}
