// The NVTX ranges a short CPU training run emits, recorded by tests/nvtx_recorder.cpp injected
// through NVTX_INJECTION64_PATH: their names, nesting and step payloads. Needs no GPU.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <iterator>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
struct Push {
  std::string name;
  int depth;
  long long payload;
};

// A tiny MNIST-format data set (big-endian IDX headers), raw files.
void write_idx(const fs::path& p, std::vector<uint32_t> dims, size_t n_bytes, int mod) {
  std::ofstream f(p, std::ios::binary);
  unsigned char head[4] = {0, 0, 8, (unsigned char)dims.size()};
  f.write(reinterpret_cast<char*>(head), 4);
  for (uint32_t d : dims) {
    unsigned char b[4] = {(unsigned char)(d >> 24), (unsigned char)(d >> 16), (unsigned char)(d >> 8), (unsigned char)d};
    f.write(reinterpret_cast<char*>(b), 4);
  }
  for (size_t i = 0; i < n_bytes; ++i) f.put(char((i * 7 + 3) % mod));
}

std::vector<Push> run_and_record(const fs::path& dir) {
  write_idx(dir / "train-images-idx3-ubyte", {300, 28, 28}, 300 * 784, 256);
  write_idx(dir / "train-labels-idx1-ubyte", {300}, 300, 10);
  write_idx(dir / "t10k-images-idx3-ubyte", {50, 28, 28}, 50 * 784, 256);
  write_idx(dir / "t10k-labels-idx1-ubyte", {50}, 50, 10);
  fs::path log = dir / "nvtx.log";
  std::string cmd = "NVTX_INJECTION64_PATH=" LOUPE_NVTX_RECORDER " LOUPE_NVTX_LOG=" + log.string() + " " LOUPE_CLI +
                    " train mnist_mlp --device cpu --epochs 1 --max-steps 3 --plain --data " + dir.string() +
                    " --save " + (dir / "m.ckpt").string() + " > " + (dir / "out.txt").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::vector<Push> out;
  std::ifstream f(log);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    Push p;
    std::getline(s, p.name, '\t');
    s >> p.depth >> p.payload;
    out.push_back(p);
  }
  return out;
}
}  // namespace

TEST(Nvtx, TrainingEmitsNamedNestedRanges) {
  fs::path dir = fs::temp_directory_path() / ("loupe_nvtx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<Push> pushes = run_and_record(dir);
  fs::remove_all(dir);
  ASSERT_FALSE(pushes.empty()) << "no ranges recorded: was the injection library loaded?";

  std::map<std::string, int> count;
  for (const Push& p : pushes) count[p.name]++;
  EXPECT_EQ(count["epoch"], 1);
  EXPECT_EQ(count["step"], 3);
  for (const char* phase : {"data", "forward", "backward", "optimizer"}) EXPECT_EQ(count[phase], 3) << phase;
  EXPECT_EQ(count["evaluation"], 1);
  EXPECT_EQ(count["collate"], 3);    // loader workers, one per batch
  EXPECT_EQ(count["data wait"], 3);  // the training thread waiting for each batch
  EXPECT_EQ(count["checkpoint"], 1);
  // Module ranges by path: forward of each training step, and of the one evaluation batch. A
  // Linear with the ReLU and Dropout after it runs as one fused layer, one range named for all.
  EXPECT_EQ(count["Sequential"], 4);
  EXPECT_EQ(count["fc2/Linear+fc2_relu/ReLU+drop2/Dropout"], 4);
  EXPECT_EQ(count["fc3/Linear"], 4);
  EXPECT_EQ(count["drop1/Dropout"], 0) << "fused into fc1";

  // Nesting: epoch > step > forward > Sequential > fc1/Linear, and the step number as payload.
  int steps_seen = 0;
  for (size_t i = 0; i < pushes.size(); ++i) {
    const Push& p = pushes[i];
    if (p.name == "epoch") EXPECT_EQ(p.depth, 0);
    if (p.name == "step") {
      EXPECT_EQ(p.depth, 1);
      EXPECT_EQ(p.payload, ++steps_seen);
    }
    if (p.name == "forward" || p.name == "backward" || p.name == "optimizer" || p.name == "data") {
      EXPECT_EQ(p.depth, 2) << p.name;
    }
    if (p.name == "Sequential" && p.payload > 0) {
      EXPECT_EQ(p.depth, 3);
      ASSERT_LT(i + 1, pushes.size());
      EXPECT_EQ(pushes[i + 1].name, "input/Reshape");  // [28, 28] to the file's input, [784]
      EXPECT_EQ(pushes[i + 1].depth, 4);
    }
    if (p.name == "evaluation") EXPECT_EQ(p.depth, 0);
  }
  EXPECT_EQ(steps_seen, 3);
}

// Ctrl-C during training: the run stops after the current step, shuts the loader down and exits
// with 130, well before the epoch would have ended.
TEST(Cli, CtrlCStopsCleanly) {
  fs::path out = fs::temp_directory_path() / ("loupe_sigint_" + std::to_string(::getpid()) + ".txt");
  // SIGINT half a second after training starts (its "step" line), not at a fixed time: on a loaded
  // machine start-up alone can take seconds, and a signal then stops the run before epoch 1.
  std::string cmd = std::string("sh -c '") + LOUPE_CLI + " train mnist_mlp --device cpu --synthetic --epochs 50 --plain > " +
                    out.string() + " 2>&1 & p=$!; i=0; while [ $i -lt 600 ] && ! grep -q \"^step\" " + out.string() +
                    "; do sleep 0.1; i=$((i+1)); done; sleep 0.5; kill -INT $p; wait $p'";
  auto t0 = std::chrono::steady_clock::now();
  int rc = std::system(cmd.c_str());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream f(out);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fs::remove(out);
  EXPECT_TRUE(WIFEXITED(rc)) << text;
  EXPECT_EQ(WEXITSTATUS(rc), 130) << text;
  EXPECT_NE(text.find("interrupted in epoch 1"), std::string::npos) << text;
  EXPECT_LT(secs, 30.0);
}
