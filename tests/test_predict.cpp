// The step predicted on another GPU (instrument/predict.h): the datasheet table, the model on rows
// bound by compute, memory and latency, a profile read back from its JSON, and the prediction from
// stored H100 profiles against the H200/H100 ratios measured on the two GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "instrument/op_profile.h"
#include "instrument/peak.h"
#include "instrument/predict.h"

using namespace loupe;
using namespace loupe::instrument;

namespace {
ProfileRow row(const std::string& op, double kernels, double us, double flops, double bytes) {
  ProfileRow r;
  r.module = "m";
  r.op = op;
  r.phase = "forward";
  r.kernels = kernels;
  r.seconds = r.busy_seconds = us * 1e-6;
  r.flops = flops;
  r.bytes = bytes;
  return r;
}

Profile synthetic_profile() {
  Profile p;
  p.gpu = true;
  p.device = "NVIDIA H100 80GB HBM3";
  p.ceilings.precision = Precision::FP16;
  p.steps = 10;
  // A GEMM at half the H100's 16-bit peak; a copy at half its bandwidth; a one-element kernel (the
  // floor, 2 us); a row with neither kernels nor anything counted.
  p.rows = {row("gemm", 1, 200, 0.5 * 989.4e12 * 200e-6, 1e6), row("copy", 2, 100, 1e3, 0.5 * 3350e9 * 100e-6),
            row("ones", 1, 2, 1, 4), row("host", 0, 7, 0, 0)};
  for (const ProfileRow& r : p.rows) p.busy += r.busy_seconds;
  p.wall = p.busy + 50e-6;
  p.idle = p.wall - p.busy;
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST(Predict, DatasheetRowsHaveBandwidth) {
  auto h100 = datasheet("NVIDIA H100 80GB HBM3"), h200 = datasheet("NVIDIA H200");
  ASSERT_TRUE(h100 && h200);
  EXPECT_EQ(h100->gbs, 3350);
  EXPECT_EQ(h200->gbs, 4800);
  EXPECT_EQ(h100->tflops(Precision::BF16), 989.4);
  EXPECT_EQ(datasheet("NVIDIA H100 PCIe")->gbs, 2000);
  EXPECT_EQ(datasheet("NVIDIA GH200 480GB")->label, "NVIDIA GH200");  // not the H200's row
  EXPECT_EQ(datasheet("A10")->label, "NVIDIA A10");                  // not the A100's
  EXPECT_FALSE(datasheet("Some Future GPU"));
  EXPECT_NE(datasheet_names().find("H100 PCIe"), std::string::npos);
}

TEST(Predict, EachRowScalesByItsBound) {
  const Profile p = synthetic_profile();
  const Prediction pr = predict(p, *datasheet("H100"), *datasheet("H200"), Precision::FP16);
  ASSERT_EQ(pr.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(pr.floor, 2e-6);
  EXPECT_NEAR(pr.rows[0].to, 200e-6, 1e-12);  // compute: the same peak
  EXPECT_EQ(pr.rows[0].bound, "compute");
  EXPECT_NEAR(pr.rows[1].to, 50e-6 * 3350 / 4800 + 50e-6, 1e-12);  // memory: its least by the bandwidths
  EXPECT_EQ(pr.rows[1].bound, "memory");
  EXPECT_NEAR(pr.rows[2].to, 2e-6, 1e-15);  // latency: the floor
  EXPECT_EQ(pr.rows[2].bound, "latency");
  EXPECT_EQ(pr.rows[3].to, 7e-6);  // nothing counted: kept
  EXPECT_EQ(pr.rows[3].bound, "kept");
  EXPECT_NEAR(pr.idle, 50e-6, 1e-12);
  EXPECT_NEAR(pr.step_to, pr.busy_to + 50e-6, 1e-12);
  EXPECT_NEAR(pr.busy_to, 200e-6 + 50e-6 * 3350 / 4800 + 50e-6 + 2e-6 + 7e-6, 1e-12);
  // To a GPU with a third of the 16-bit peak (an A100 has 312 of 989.4): the GEMM's least time
  // grows by that, the 100 us above it stays.
  const Prediction a100 = predict(p, *datasheet("H100"), *datasheet("A100"), Precision::FP16);
  EXPECT_NEAR(a100.rows[0].to, 100e-6 * 989.4 / 312 + 100e-6, 1e-9);
  // A row faster than its least (its bytes from a cache) scales by the two least times.
  Profile cached = p;
  cached.rows[1].busy_seconds = 25e-6;
  EXPECT_NEAR(predict(cached, *datasheet("H100"), *datasheet("H200"), Precision::FP16).rows[1].to,
              25e-6 * 3350 / 4800, 1e-12);
  const std::string text = prediction_text(pr);
  EXPECT_NE(text.find("predicted on NVIDIA H200 SXM"), std::string::npos) << text;
  EXPECT_NE(text.find("memory-bound there"), std::string::npos) << text;
}

TEST(Predict, RefusesACpuProfile) {
  Profile p = synthetic_profile();
  p.gpu = false;
  EXPECT_THROW(predict(p, *datasheet("H100"), *datasheet("H200"), Precision::FP16), Error);
}

TEST(Predict, ProfileReadsBackFromItsJson) {
  Profile p = synthetic_profile();
  const Profile back = profile_from_json(profile_json(p));
  EXPECT_EQ(back.device, p.device);
  EXPECT_EQ(back.ceilings.precision, Precision::FP16);
  EXPECT_TRUE(back.gpu);
  ASSERT_EQ(back.rows.size(), p.rows.size());
  for (size_t i = 0; i < p.rows.size(); ++i) {
    EXPECT_NEAR(back.rows[i].busy_seconds, p.rows[i].busy_seconds, 1e-12);
    EXPECT_EQ(back.rows[i].flops, p.rows[i].flops);
    EXPECT_EQ(back.rows[i].bytes, p.rows[i].bytes);
    EXPECT_EQ(back.rows[i].kernels, p.rows[i].kernels);
  }
  EXPECT_NEAR(back.wall, p.wall, 1e-12);
  for (const char* bad : {"", "[]", "{\"steps\": 1}", "{\"steps\":1,\"gpu\":true,\"wall_us_per_step\":1,"
                          "\"busy_us_per_step\":1,\"idle_us_per_step\":0,\"boundary_us_per_step\":0,\"rows\":[{}]}"})
    EXPECT_THROW(profile_from_json(bad), Error) << bad;
}

// H100 profiles of the six models (fp16, a CUDA graph, docs/profiling.md "Predicting another GPU")
// predicted on an H200, against the H200/H100 samples/s measured on the two GPUs with one build at
// the same batches (lab/results/h100-h200-2026-11-24/compare.csv): within 15 %.
TEST(Predict, StoredH100ProfilesAgainstTheMeasuredH200) {
  const struct {
    const char* model;
    double measured;  // H200 samples/s over H100's
  } pairs[] = {{"mnist_mlp@128", 1.0105},   {"mnist_cnn@128", 1.03303},   {"cifar10_cnn@32", 1.07809},
               {"imdb_bilstm@32", 1.07526}, {"imdb_fasttext@32", 1.18082}, {"char_lstm@128", 0.905316}};
  for (const auto& c : pairs) {
    const Profile p =
        profile_from_json(read_file(std::string(LOUPE_SOURCE_DIR) + "/tests/data/predict/h100-" + c.model + "-fp16.json"));
    ASSERT_FALSE(p.rows.empty()) << c.model;
    const Prediction pr = predict(p, *datasheet(p.device), *datasheet("H200"), p.ceilings.precision);
    const double predicted = pr.step_from / pr.step_to;
    EXPECT_NEAR(predicted / c.measured, 1.0, 0.15) << c.model << ": predicted " << predicted << "x";
    EXPECT_GE(predicted, 1.0 - 1e-12) << c.model;  // the H200 differs only in bandwidth: never slower
  }
}
