// Hostile checkpoints: files whose CRC is valid (written by the format's own writer) but whose
// records or metadata lie. Each must be refused with a sentence naming the file and the field,
// before anything is copied; a sound file still loads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "loupe.h"
#include "train/checkpoint.h"
#include "train/checkpoint_file.h"
#include "test_util.h"

using namespace loupe;

namespace {

struct Fixture {
  nn::Sequential m;
  std::unique_ptr<optim::SGD> opt;
  std::string path = test::temp_path("loupe_test_hostile.ckpt").string();
  CheckpointFile good;
  Fixture() {
    m.add("fc", std::make_shared<nn::Linear>(3, 2));
    m.to(kCPU);
    opt = std::make_unique<optim::SGD>(m.arena(), 0.1, 0.9);
    train::save_checkpoint(path, m, opt.get(), {"tiny", 3, 7, 11});
    good = read_checkpoint_file(path);
  }
  ~Fixture() { std::remove(path.c_str()); }
  // The error of loading `f` (written with a valid CRC), or "" when it loads.
  std::string load(const CheckpointFile& f) {
    write_checkpoint_file(path, f);
    try {
      train::load_checkpoint(path, m, opt.get(), "tiny");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string with_record(const std::function<void(CheckpointRecord&)>& edit) {
    CheckpointFile f = good;
    edit(f.records.at(0));
    return load(f);
  }
  std::string with_meta(const std::string& key, const std::string& value) {
    CheckpointFile f = good;
    for (auto& kv : f.meta)
      if (kv.first == key) kv.second = value;
    return load(f);
  }
};

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

}  // namespace

TEST(CheckpointHostile, SoundFileLoads) {
  Fixture x;
  EXPECT_EQ(x.load(x.good), "");
  train::CheckpointMeta m = train::load_checkpoint(x.path, x.m, x.opt.get(), "tiny");
  EXPECT_EQ(m.epoch, 3);
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(m.rng_offset, 11u);
}

TEST(CheckpointHostile, RecordBytesMustMatchItsShape) {
  Fixture x;
  const std::string name = x.good.records.at(0).name;
  std::string e = x.with_record([](CheckpointRecord& r) { r.bytes.resize(r.bytes.size() / 2); });
  EXPECT_HAS(e, "holds 12 bytes but its shape and dtype need 24");
  EXPECT_HAS(e, name);
  EXPECT_HAS(e, x.path);
  EXPECT_HAS(x.with_record([](CheckpointRecord& r) { r.bytes.clear(); }), "holds 0 bytes");
  EXPECT_HAS(x.with_record([](CheckpointRecord& r) { r.bytes.resize(r.bytes.size() + 4); }), "holds 28 bytes");
}

TEST(CheckpointHostile, ShapeAndDtypeAreCheckedWithTheFileNamed) {
  Fixture x;
  EXPECT_HAS(x.with_record([](CheckpointRecord& r) { r.shape = {2, 3, 1, 1, 1, 1, 1, 1, 1, 1}; }),
             "is [2, 3, 1, 1, 1, 1, 1, 1, 1, 1] in the file but [2, 3] in the model");
  EXPECT_HAS(x.with_record([](CheckpointRecord& r) { r.shape = {-2, -3}; }), "is [-2, -3] in the file");
  EXPECT_HAS(x.with_record([](CheckpointRecord& r) { r.dtype = 12345; }), "dtype code 12345 in the file");
}

TEST(CheckpointHostile, MetadataNumbersAreCheckedAndInRange) {
  Fixture x;
  for (const char* bad : {"abc", "", "2147483647", "-5", "3x", "1000001", " 3"})
    EXPECT_HAS(x.with_meta("epoch", bad), "its 'epoch' must be an integer from 0 to 1000000, got '" + std::string(bad) + "'");
  EXPECT_EQ(x.with_meta("epoch", "1000000"), "");
  EXPECT_HAS(x.with_meta("optimizer_steps", "x"), "its 'optimizer_steps' must be an integer from 0 to");
  EXPECT_HAS(x.with_meta("optimizer_steps", "-1"), "'optimizer_steps'");
  EXPECT_HAS(x.with_meta("seed", "-1"), "its 'seed' must be an integer from 0 to 18446744073709551615");
  EXPECT_HAS(x.with_meta("seed", "18446744073709551616"), "'seed'");
  EXPECT_HAS(x.with_meta("rng_offset", "1e3"), "'rng_offset'");
}

// A checkpoint whose weights are NaN or infinite (saved by a run that diverged) is refused by
// name; it used to load and evaluate at chance with no word.
TEST(CheckpointHostile, NonFiniteWeightsAreRefused) {
  Fixture x;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::string e = x.with_record([&](CheckpointRecord& r) { std::memcpy(r.bytes.data() + 8, &bad, 4); });
    EXPECT_HAS(e, "tensor '" + x.good.records.at(0).name + "' holds 1 NaN or infinite values (of 6)");
    EXPECT_HAS(e, "the run that saved it had diverged");
    EXPECT_HAS(e, x.path);
  }
}
