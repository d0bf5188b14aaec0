// The checkpoint file format: round trips, and every kind of damaged or foreign file is a
// loupe::Error that names the problem, never a crash or a huge allocation.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/checkpoint_file.h"

namespace loupe {
namespace {

// Each test gets its own empty directory, removed afterwards.
class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/loupe_ckpt_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : list_dir()) std::remove((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }
  std::vector<std::string> list_dir() const {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
      closedir(d);
    }
    return names;
  }
  std::string dir_;
};

CheckpointFile sample() {
  CheckpointFile c;
  c.model = "mnist_mlp";
  c.meta = {{"optimizer", "rmsprop"}, {"epoch", "3"}, {"seed", "42"}, {"empty", ""}};
  c.records.push_back({"model/scale", 1, {}, {1, 2, 3, 4}});                // scalar
  c.records.push_back({"model/conv.weight", 2, {2, 1, 3}, std::vector<uint8_t>(24, 7)});
  c.records.push_back({"optim/rms.v", -5, {0, 4}, {}});                     // zero-length
  return c;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Reads path expecting an Error; returns its message ("" means no Error was thrown).
std::string read_error(const std::string& path) {
  try {
    read_checkpoint_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(CheckpointFileTest, RoundTrip) {
  const std::string path = dir_ + "/a.ckpt";
  const CheckpointFile in = sample();
  write_checkpoint_file(path, in);
  const CheckpointFile out = read_checkpoint_file(path);
  EXPECT_EQ(out.model, in.model);
  EXPECT_EQ(out.meta, in.meta);
  ASSERT_EQ(out.records.size(), in.records.size());
  for (size_t i = 0; i < in.records.size(); ++i) {
    EXPECT_EQ(out.records[i].name, in.records[i].name);
    EXPECT_EQ(out.records[i].dtype, in.records[i].dtype);
    EXPECT_EQ(out.records[i].shape, in.records[i].shape);
    EXPECT_EQ(out.records[i].bytes, in.records[i].bytes);
  }
  ASSERT_NE(out.find("optim/rms.v"), nullptr);
  EXPECT_EQ(out.find("optim/rms.v")->dtype, -5);
  EXPECT_EQ(out.find("nope"), nullptr);
  EXPECT_EQ(out.meta_value("epoch"), "3");
  EXPECT_EQ(out.meta_value("missing", "dflt"), "dflt");
}

TEST_F(CheckpointFileTest, OverwriteLeavesNoTempFile) {
  const std::string path = dir_ + "/a.ckpt";
  write_checkpoint_file(path, CheckpointFile{});
  write_checkpoint_file(path, sample());  // rename replaces the old file
  EXPECT_EQ(list_dir(), std::vector<std::string>{"a.ckpt"});
  EXPECT_EQ(read_checkpoint_file(path).model, "mnist_mlp");
}

TEST_F(CheckpointFileTest, EveryTruncationIsAnError) {
  const std::string path = dir_ + "/a.ckpt";
  write_checkpoint_file(path, sample());
  const std::vector<uint8_t> full = read_bytes(path);
  const std::string cut = dir_ + "/cut.ckpt";
  for (size_t len = 0; len < full.size(); ++len) {
    write_bytes(cut, std::vector<uint8_t>(full.begin(), full.begin() + len));
    EXPECT_NE(read_error(cut).find("truncated"), std::string::npos) << "cut at " << len;
  }
}

TEST_F(CheckpointFileTest, EveryFlippedByteIsAnError) {
  const std::string path = dir_ + "/a.ckpt";
  write_checkpoint_file(path, sample());
  const std::vector<uint8_t> full = read_bytes(path);
  const std::string bad = dir_ + "/bad.ckpt";
  for (size_t i = 0; i < full.size(); ++i) {
    std::vector<uint8_t> b = full;
    b[i] ^= 0x5a;
    write_bytes(bad, b);
    EXPECT_NE(read_error(bad), "") << "flipped byte " << i;
  }
  // A flip inside the records is caught by the checksum.
  std::vector<uint8_t> b = full;
  b[full.size() / 2] ^= 1;
  write_bytes(bad, b);
  EXPECT_NE(read_error(bad).find("corrupt"), std::string::npos);
}

TEST_F(CheckpointFileTest, BadLengthWithValidCrcIsAnError) {
  // A hand-made file whose record claims 2^62 bytes: the length guard, not the CRC, must stop it.
  std::vector<uint8_t> b = {'L', 'O', 'U', 'P', 'E', 'C', 'K', 'P', 1, 0, 0, 0};
  for (uint8_t x : {0, 0, 0, 0, /*meta*/ 0, 0, 0, 0, /*records*/ 1, 0, 0, 0, /*name*/ 0, 0, 0, 0,
                    /*dtype*/ 0, 0, 0, 0, /*rank*/ 0, 0, 0, 0, /*bytes*/ 0, 0, 0, 0, 0, 0, 0, 0x40})
    b.push_back(x);
  const uint32_t crc = static_cast<uint32_t>(crc32(0, b.data(), static_cast<uInt>(b.size())));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  for (char c : std::string("LOUPEEND")) b.push_back(static_cast<uint8_t>(c));
  const std::string path = dir_ + "/hand.ckpt";
  write_bytes(path, b);
  EXPECT_NE(read_error(path).find("corrupt"), std::string::npos) << read_error(path);
}

TEST_F(CheckpointFileTest, ForeignFileIsNotACheckpoint) {
  const std::string text = dir_ + "/notes.txt";
  write_bytes(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'});
  EXPECT_NE(read_error(text).find("not a loupe checkpoint"), std::string::npos);
  const std::string png = dir_ + "/image.png";
  write_bytes(png, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'});
  const std::string msg = read_error(png);
  EXPECT_NE(msg.find("not a loupe checkpoint"), std::string::npos);
  EXPECT_NE(msg.find(png), std::string::npos);  // the message names the file
}

TEST_F(CheckpointFileTest, NewerVersionIsRefused) {
  const std::string path = dir_ + "/a.ckpt";
  write_checkpoint_file(path, sample());
  std::vector<uint8_t> b = read_bytes(path);
  b[8] = kCheckpointVersion + 1;
  write_bytes(path, b);
  const std::string msg = read_error(path);
  EXPECT_NE(msg.find("newer loupe (format version 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reads version 1"), std::string::npos) << msg;
}

TEST_F(CheckpointFileTest, MissingFileAndDirectory) {
  const std::string missing = dir_ + "/nope.ckpt";
  const std::string msg = read_error(missing);
  EXPECT_NE(msg.find("does not exist"), std::string::npos);
  EXPECT_NE(msg.find(missing), std::string::npos);
  EXPECT_NE(read_error(dir_), "");  // a directory is not a checkpoint either

  const std::string no_dir = dir_ + "/no/such/dir";
  try {
    write_checkpoint_file(no_dir + "/a.ckpt", sample());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("directory '" + no_dir + "' does not exist"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(list_dir().empty());
}

TEST_F(CheckpointFileTest, DuplicateRecordNameIsRefused) {
  CheckpointFile c = sample();
  c.records.push_back(c.records[0]);
  EXPECT_THROW(write_checkpoint_file(dir_ + "/a.ckpt", c), Error);
  EXPECT_TRUE(list_dir().empty());  // nothing written, no temp file left
}

// kill -9 at random moments of a save: the last complete checkpoint always loads, whole, and no
// partial temporary file is left (the old writer's named "<path>.tmp.<pid>" files, half written,
// stayed in 6 of 20 such kills). The file is written unnamed (O_TMPFILE) and named only when
// complete, just before the rename: a kill in that instant of two system calls leaves one whole
// "<path>.tmp.<killed pid>", which the next save removes (a CI run hit it once). A
// child process overwrites the checkpoint back to back, each version 8 MB of one byte value.
TEST_F(CheckpointFileTest, KilledWritersLeaveNoTempFileAndAWholeCheckpoint) {
  const std::string path = dir_ + "/ck.bin";
  auto version = [](int v) {
    CheckpointFile c;
    c.model = "mnist_mlp";
    c.meta = {{"version", std::to_string(v)}};
    c.records.push_back({"model/w", 1, {8 << 20}, std::vector<uint8_t>(8 << 20, uint8_t(v))});
    return c;
  };
  const auto t0 = std::chrono::steady_clock::now();
  write_checkpoint_file(path, version(0));
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> when(0.0, 3 * write_s + 0.002);
  std::set<std::string> killed;
  for (int kill_no = 1; kill_no <= 25; ++kill_no) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int v = 1;; v = v % 200 + 1) write_checkpoint_file(path, version(v));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(when(rng)));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended by itself";
    killed.insert("ck.bin.tmp." + std::to_string(child));
    std::vector<std::string> whole{path};
    for (const std::string& name : list_dir()) {
      if (name == "ck.bin") continue;
      // Only a killed writer's file, named in the instant before its rename (the next writer may
      // have died too before its first save removed it), and whole.
      EXPECT_TRUE(killed.count(name)) << name << " after kill " << kill_no;
      whole.push_back(dir_ + "/" + name);
    }
    for (const std::string& file : whole) {
      CheckpointFile c;
      ASSERT_NO_THROW(c = read_checkpoint_file(file)) << file << " after kill " << kill_no;
      const std::vector<uint8_t>& b = c.records.at(0).bytes;
      ASSERT_EQ(b.size(), size_t(8 << 20));
      EXPECT_EQ(std::count(b.begin(), b.end(), uint8_t(std::stoi(c.meta_value("version")))), int64_t(b.size()));
    }
  }
  write_checkpoint_file(path, version(0));  // a save that ends removes a dead writer's leftover
  EXPECT_EQ(list_dir(), std::vector<std::string>{"ck.bin"});
}

// Temporary files of writers that no longer exist are removed by the next save to the path;
// a live process's, and names that only look alike, are left alone.
TEST_F(CheckpointFileTest, StaleTempFilesOfDeadWritersAreRemoved) {
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string path = dir_ + "/a.ckpt";
  for (const std::string& tail : {std::to_string(dead), std::string("1"), std::string("x7")})
    write_bytes(path + ".tmp." + tail, {1, 2, 3});
  write_checkpoint_file(path, sample());
  std::vector<std::string> names = list_dir();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.ckpt", "a.ckpt.tmp.1", "a.ckpt.tmp.x7"}));
}

}  // namespace
}  // namespace loupe
