// `loupe profile` (docs/profiling.md, "Where the time goes, op by op: `loupe profile`"), the parts
// visible without a GPU: every op of the table records its name, FLOPs and bytes (the records'
// FLOPs add up exactly to core/flops.h's count, forward and backward; a single op's bytes are the
// op table's analytic count), the join of op records with activity records into rows, and the
// command on the CPU end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/flops.h"
#include "core/nvtx.h"
#include "core/op_record.h"
#include "instrument/graph_nodes.h"
#include "instrument/op_profile.h"
#include "loupe.h"
#include "op_cases.h"
#include "test_util.h"
#include "skip.h"

using namespace loupe;

namespace {
// Recording on for one scope of a test, and whatever it left taken.
struct Recording {
  Recording() { op_records_enable(true); }
  ~Recording() {
    op_records_enable(false);
    op_records_take();
  }
};

double sum_flops(const std::vector<OpRecord>& rs) {
  double f = 0;
  for (const auto& r : rs) f += r.flops;
  return f;
}
}  // namespace

class OpRecords : public ::testing::TestWithParam<test::OpCase> {};

// Forward and backward of every case: records named, every FLOP in a record or counted as outside
// any op (exactly core/flops.h's count); a case that is one op moves the table's bytes, and a
// case of several ops at least that many (the intermediates are written and read again).
TEST_P(OpRecords, AddUpToTheFlopCountAndTheTablesBytes) {
  const test::OpCase& c = GetParam();
  std::vector<Tensor> xs = test::make_inputs(c, DType::f32, 7);
  Recording on;
  const double f0 = flops_counted();
  Tensor out = c.f(xs);
  const double f1 = flops_counted();
  double unscoped = 0;
  std::vector<OpRecord> fwd = op_records_take(&unscoped);
  EXPECT_DOUBLE_EQ(sum_flops(fwd) + unscoped, f1 - f0) << c.name << " forward";
  for (const auto& r : fwd) {
    EXPECT_FALSE(r.op.empty()) << c.name;
    EXPECT_EQ(r.phase, "other") << c.name << ": no trainer phase is open here";
    EXPECT_GT(r.id, 0u) << c.name;
    EXPECT_GE(r.host_end, r.host_begin) << c.name;
  }
  if (!fwd.empty()) {
    double bytes = 0;
    for (const auto& r : fwd) bytes += r.bytes;
    const double want = test::op_bytes(c, out.shape(), double(dtype_size(DType::f32)));
    // Two cases multiply an input by a view of itself: the op reads both operands, the table
    // counts the case's one input once.
    const bool reads_twice = c.name == "reshape_flatten" || c.name == "slice";
    if (fwd.size() == 1 && !reads_twice) EXPECT_DOUBLE_EQ(bytes, want) << c.name << " (" << fwd[0].op << ")";
    else EXPECT_GE(bytes, want * (1 - 1e-12)) << c.name;
  }
  backward(out, ones(out.shape(), out.dtype(), out.device()));
  const double f2 = flops_counted();
  std::vector<OpRecord> bwd = op_records_take(&unscoped);
  EXPECT_DOUBLE_EQ(sum_flops(bwd) + unscoped, f2 - f1) << c.name << " backward";
  for (const auto& r : bwd) EXPECT_EQ(r.phase, "backward") << c.name << " " << r.op;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpRecords, ::testing::ValuesIn(test::op_cases()),
                         [](const auto& info) { return info.param.name; });

// Off, nothing is kept; nested ops are their outer op's; module and phase ranges name the record;
// the backward record of a node carries the module and op that recorded it.
TEST(OpRecords, NestingModulesPhasesAndBackwardSites) {
  Tensor x = full(Shape{4, 3}, 0.5).requires_grad_(true);
  Tensor w = full(Shape{5, 3}, 0.25).requires_grad_(true), b = zeros(Shape{5}).requires_grad_(true);
  linear(x, w, b);
  EXPECT_TRUE(op_records_take().empty()) << "recording is off by default";
  Recording on;
  Tensor y;
  {
    NvtxRange phase("forward", RangeKind::Phase);
    NvtxRange module("fc1/Linear", RangeKind::Module);
    y = linear(x, w, b);  // matmul and bias_add inside: one record
  }
  std::vector<OpRecord> fwd = op_records_take();
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].op, "linear");
  EXPECT_EQ(fwd[0].module, "fc1/Linear");
  EXPECT_EQ(fwd[0].phase, "forward");
  EXPECT_DOUBLE_EQ(fwd[0].flops, 2.0 * 4 * 5 * 3 + 4 * 5);
  EXPECT_DOUBLE_EQ(fwd[0].bytes, 4.0 * (12 + 15 + 5 + 20));
  {
    NvtxRange phase("backward", RangeKind::Phase);
    backward(sum(y));
  }
  std::map<std::string, int> ops;
  for (const auto& r : op_records_take()) {
    EXPECT_EQ(r.phase, "backward");
    ops[r.module + " " + r.op]++;
  }
  EXPECT_GE(ops["fc1/Linear linear"], 1) << "the linear's backward nodes carry its site";
  EXPECT_EQ(ops[" sum"], 1);
  EXPECT_EQ(ops[" AccumulateGrad"], 3) << "x, w and b";
}

// The join: kernels go to the op that launched them, others are rows of their own; per step
// figures, shares of the busy time, the bound against the ridge point, the targets.
TEST(OpProfile, JoinsKernelsToOpsAndClassifies) {
  instrument::ProfileInput in;
  in.gpu = true;
  in.steps = 2;
  in.wall_seconds = 2 * 100e-6;
  in.busy_seconds = 2 * 80e-6;
  in.ceilings.flops = 100e12;     // ridge point: 100 FLOP per byte
  in.ceilings.bandwidth = 1e12;
  auto op = [](const char* name, const char* mod, double flops, double bytes, uint64_t id) {
    OpRecord r;
    r.op = name;
    r.module = mod;
    r.phase = "forward";
    r.flops = flops;
    r.bytes = bytes;
    r.id = id;
    return r;
  };
  for (uint64_t s = 0; s < 2; ++s) {
    in.ops.push_back(op("matmul", "fc1/Linear", 5e9, 10e6, 10 + s));  // 500 FLOP/B: compute
    in.ops.push_back(op("relu", "relu1/ReLU", 1e6, 8e6, 20 + s));     // memory
    in.ops.push_back(op("reshape", "", 0, 0, 30 + s));                // no kernel: no row
    const uint64_t t = s * 1000000;
    in.activity.push_back({"sgemm_a", t, t + 40000, 0, 7, 10 + s});   // 40 us
    in.activity.push_back({"sgemm_b", t + 40000, t + 60000, 0, 7, 10 + s});  // 20 us
    in.activity.push_back({"relu_kernel", t + 60000, t + 70000, 0, 7, 20 + s});  // 10 us
    in.activity.push_back({"memcpy HtoD", t + 70000, t + 75000, 1, 9, 0});  // the loader's copy, 5 us
  }
  instrument::Profile p = instrument::build_profile(in);
  ASSERT_EQ(p.rows.size(), 3u);
  EXPECT_EQ(p.rows[0].op, "matmul");
  EXPECT_DOUBLE_EQ(p.rows[0].calls, 1);
  EXPECT_DOUBLE_EQ(p.rows[0].kernels, 2);
  EXPECT_NEAR(p.rows[0].seconds, 60e-6, 1e-12);
  EXPECT_NEAR(p.rows[0].share, 0.75, 1e-9);
  EXPECT_DOUBLE_EQ(p.rows[0].flops, 5e9);
  EXPECT_EQ(p.rows[0].bound, "compute");
  EXPECT_NEAR(p.rows[0].pct_ceiling, 100 * (5e9 / 60e-6) / 100e12, 1e-6);
  EXPECT_EQ(p.rows[1].op, "relu");
  EXPECT_EQ(p.rows[1].bound, "memory");
  EXPECT_NEAR(p.rows[1].pct_ceiling, 100 * (8e6 / 10e-6) / 1e12, 1e-6);
  EXPECT_EQ(p.rows[2].op, "memcpy HtoD");
  EXPECT_EQ(p.rows[2].phase, "unattributed");
  EXPECT_EQ(p.rows[2].bound, "unknown") << "no FLOPs or bytes: no ceiling to compare with";
  EXPECT_LT(p.rows[2].pct_ceiling, 0);
  EXPECT_NEAR(p.rows_seconds, 75e-6, 1e-12);
  EXPECT_NEAR(p.idle, 20e-6, 1e-12);
  ASSERT_FALSE(p.targets.empty());
  EXPECT_EQ(p.targets[0].rfind("fc1 matmul forward: 75 % of the step at 83 % of the compute peak", 0), 0u) << p.targets[0];
  const std::string csv = instrument::profile_csv(p), json = instrument::profile_json(p);
  EXPECT_NE(csv.find("\"fc1/Linear\",\"matmul\",forward,1,2,60,60,0.75,5000000000,10000000,"), std::string::npos) << csv;
  EXPECT_NE(json.find("\"flops_per_step\":5001000000,"), std::string::npos) << json;
  EXPECT_NE(instrument::profile_table(p).find("fc1"), std::string::npos);
}

// On the CPU a memory-bound op whose bytes per call fit in the last-level cache is read from
// there: its share of the memory bandwidth may pass 100 % (zero_grad at 230 %), and the table
// marks it and says why; one whose bytes do not fit is not marked.
TEST(OpProfile, CpuOpInCacheIsMarked) {
  instrument::ProfileInput in;
  in.steps = 1;
  in.ceilings.flops = 100e9;
  in.ceilings.bandwidth = 10e9;
  in.ceilings.cache_bytes = 32.0 * (1 << 20);
  OpRecord small{"zero_grad", "", "forward", 0, 2.7e6, 0, 100e-6, 1, 0};  // 27 GB/s: 270 %
  OpRecord large{"copy", "", "forward", 0, 800e6, 1, 1.1, 2, 0};          // 8 GB/s: 80 %
  in.ops = {small, large};
  in.busy_seconds = in.wall_seconds = 1.1001;
  instrument::Profile p = instrument::build_profile(in);
  ASSERT_EQ(p.rows.size(), 2u);
  const instrument::ProfileRow& z = p.rows[1].op == "zero_grad" ? p.rows[1] : p.rows[0];
  const instrument::ProfileRow& c = p.rows[1].op == "zero_grad" ? p.rows[0] : p.rows[1];
  EXPECT_NEAR(z.pct_ceiling, 270, 1e-6);
  EXPECT_TRUE(z.in_cache);
  EXPECT_NEAR(c.pct_ceiling, 80, 1e-6);
  EXPECT_FALSE(c.in_cache);
  const std::string t = instrument::profile_table(p);
  EXPECT_NE(t.find("   270*  memory"), std::string::npos) << t;
  EXPECT_NE(t.find("* its bytes per call fit in the CPU's 32 MiB last-level cache: read there, not from memory, so it "
                   "may pass 100 % of the memory bandwidth\n"), std::string::npos) << t;
  in.ceilings.cache_bytes = 0;  // a GPU: no mark
  EXPECT_EQ(instrument::profile_table(instrument::build_profile(in)).find('*'), std::string::npos);
}

// Kernels of two rows overlapping (two streams): each row keeps its kernel time, and the overlap
// is split between them, so the shares add up to the busy time, the union.
TEST(OpProfile, OverlappingKernelsShareTheOverlap) {
  instrument::ProfileInput in;
  in.gpu = true;
  in.steps = 1;
  in.wall_seconds = 200e-6;
  in.busy_seconds = 150e-6;
  OpRecord a, b;
  a.op = "lstm", a.phase = "forward", a.id = 1, a.flops = 1, a.bytes = 1;
  b.op = "lstm_reverse", b.phase = "forward", b.id = 2, b.flops = 1, b.bytes = 1;
  in.ops = {a, b};
  in.activity.push_back({"k1", 0, 100000, 0, 7, 1});
  in.activity.push_back({"k2", 50000, 150000, 0, 8, 2});
  instrument::Profile p = instrument::build_profile(in);
  ASSERT_EQ(p.rows.size(), 2u);
  for (const auto& r : p.rows) {
    EXPECT_NEAR(r.seconds, 100e-6, 1e-12) << r.op;
    EXPECT_NEAR(r.busy_seconds, 75e-6, 1e-12) << r.op;
    EXPECT_NEAR(r.share, 0.5, 1e-9) << r.op;
  }
  EXPECT_NEAR(p.rows_busy, p.busy, 1e-12);
  EXPECT_NEAR(p.rows_seconds, 200e-6, 1e-12);
}

// The command on the CPU: the table, the summary's FLOPs equal to the count, CSV and JSON written;
// a window longer than the epoch is refused with what to do.
TEST(ProfileCli, CpuRunWritesTheTable) {
  const auto csv = test::temp_path("profile.csv"), json = test::temp_path("profile.json"),
             png = test::temp_path("profile.png");
  auto [rc, out] = test::run_command(std::string(LOUPE_CLI) +
                                     " profile mnist_mlp --device cpu --synthetic --batch 32 --threads 1 " +
                                     "--profile-steps 3:6 --counters --csv " + csv.string() + " --json " +
                                     json.string() + " --png " + png.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("window  steps 3..6 (4 steps)"), std::string::npos) << out;
  EXPECT_NE(out.find("fc1+fc1_relu+drop1"), std::string::npos) << out;
  EXPECT_NE(out.find("targets\n  1. "), std::string::npos) << out;
  EXPECT_NE(out.find("counters n/a: hardware counters are read from a GPU; this run is on the CPU"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("fma%  tc% dram%"), std::string::npos) << out;
  const std::string j = test::slurp(json), c = test::slurp(csv);
  EXPECT_NE(c.find("\"linear\",backward"), std::string::npos) << c;
  EXPECT_NE(c.find("\"RMSprop\",optimizer"), std::string::npos) << c;
  // Every FLOP of the window is in a row: the rows sum to core/flops.h's count, none outside an op.
  auto field = [&](const std::string& key) {
    size_t at = j.find("\"" + key + "\":");
    return at == std::string::npos ? -1.0 : std::atof(j.c_str() + at + key.size() + 3);
  };
  EXPECT_GT(field("flops_per_step"), 0);
  EXPECT_NEAR(field("flops_per_step"), field("counted_flops_per_step"), 1e-6 * field("counted_flops_per_step"));
  EXPECT_EQ(field("unscoped_flops_per_step"), 0);
  for (const auto& p : {csv, json, png}) std::filesystem::remove(p);

  std::tie(rc, out) = test::run_command(std::string(LOUPE_CLI) +
                                        " profile mnist_mlp --device cpu --synthetic --batch 30000 --profile-steps 3:6");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("the profile window ends at step 6 but an epoch of mnist_mlp at batch 30000 has 2 steps: "
                           "--profile-steps A:B with B <= 2, or a smaller --batch"),
            std::string::npos)
      << out;
}

// A graphed window (docs/profiling.md, "The graphed step, node by node: `loupe profile MODEL
// --graph on`"): records that a graph ran carry its node, not an op; the map from nodes to the ops
// that captured them names their op, and the capture's records count once per replay, beside the
// window's own host-side ops. Nodes with no op stay unattributed, never dropped.
TEST(GraphProfile, NodesNameTheirOpsAndTheCaptureCountsEveryReplay) {
  struct FakeMap : instrument::GraphNodeMap {
    uint64_t op_of(uint64_t node) override { return node == 101 ? 7 : node == 102 ? 8 : 0; }
  } map;
  std::vector<instrument::ActivityRecord> act;
  for (int replay = 0; replay < 3; ++replay) {
    const uint64_t t = 1000 * uint64_t(replay);
    act.push_back({"gemm", t, t + 100, 0, 7, 0, 0, 101});
    act.push_back({"relu", t + 101, t + 150, 0, 7, 0, 0, 102});
    act.push_back({"u64_add", t + 151, t + 152, 0, 7, 0, 0, 103});  // captured outside any op
  }
  act.push_back({"gather", 3100, 3120, 0, 7, 9, 0, 0});  // the window's own, eager, op 9
  EXPECT_EQ(instrument::attribute_graph_nodes(act, map), 3);
  EXPECT_EQ(act[0].external, 7u);
  EXPECT_EQ(act[1].external, 8u);
  EXPECT_EQ(act[2].external, 0u);
  EXPECT_EQ(act[9].external, 9u);
  auto rec = [](uint64_t id, int64_t step, const char* op, double flops) {
    OpRecord r;
    r.id = id, r.step = step, r.op = op, r.module = "fc1/Linear", r.phase = "forward", r.flops = flops;
    return r;
  };
  // Recorded since the run began: an eager step 1, the capture at step 3, the window (10..12).
  std::vector<OpRecord> ops{rec(1, 1, "linear", 10), rec(7, 3, "linear", 10), rec(8, 3, "relu", 0),
                            rec(9, 11, "gather", 0)};
  std::vector<OpRecord> w = instrument::graph_window_ops(ops, act, 10, 12, 3);
  ASSERT_EQ(w.size(), 7u);  // linear and relu three times each, the gather once; step 1's dropped
  instrument::ProfileInput in;
  in.ops = w;
  in.activity = act;
  in.gpu = true;
  in.steps = 3;
  in.graph_replays = 3;
  instrument::Profile p = instrument::build_profile(in);
  std::map<std::string, const instrument::ProfileRow*> rows;
  for (const auto& r : p.rows) rows[r.op] = &r;
  ASSERT_TRUE(rows.count("linear") && rows.count("relu") && rows.count("u64_add") && rows.count("gather"));
  EXPECT_DOUBLE_EQ(rows["linear"]->calls, 1.0);
  EXPECT_DOUBLE_EQ(rows["linear"]->kernels, 1.0);
  EXPECT_DOUBLE_EQ(rows["linear"]->flops, 10.0);
  EXPECT_EQ(rows["u64_add"]->phase, "unattributed");
  EXPECT_EQ(p.graph_replays, 3);
  EXPECT_NEAR(p.activities, 10.0 / 3, 1e-12);
  // Gaps under 5 us between the records: 1 + 1 ns per replay, and the ones between replays.
  EXPECT_GT(p.boundary, 0.0);
}

// loupe profile --graph on (docs/profiling.md, "The graphed step, node by node: `loupe profile
// MODEL --graph on`"): the step users run, replayed from its graph, its kernels tied to the ops
// that captured them. Every replay counted, the kernels in rows named by ops (only the graph's own
// bookkeeping unattributed), and the same ops as the eager profile of the step.
TEST(ProfileGpu, TheGraphedStepNodeByNode) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  const auto json = test::temp_path("gprofile.json"), csv = test::temp_path("gprofile.csv"),
             png = test::temp_path("gprofile.png");
  const std::string common = std::string(LOUPE_CLI) + " profile mnist_mlp --synthetic --resident --precision fp16 " +
                             "--profile-steps 10:19 --csv " + csv.string() + " --png " + png.string() + " --json " +
                             json.string();
  auto [rc, out] = test::run_command(common + " --graph on");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("graphed: 10 replays of the captured step"), std::string::npos) << out;
  EXPECT_NE(out.find("boundaries"), std::string::npos) << out;
  const nlohmann::json j = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(j.at("graph_replays").get<int64_t>(), 10);
  EXPECT_GT(j.at("boundary_us_per_step").get<double>(), 0);
  // The capture's FLOPs, once per replay, are what the trainer counted for the replays.
  const double rows_flops = j.at("flops_per_step").get<double>(), counted = j.at("counted_flops_per_step").get<double>();
  EXPECT_GT(rows_flops, 0);
  EXPECT_NEAR(rows_flops, counted, 1e-6 * counted);
  EXPECT_LE(j.at("unscoped_flops_per_step").get<double>(), 1e-6 * counted);
  // Rows: kernels per step by phase; the unattributed ones are the graph's own (the random base's
  // advance), at most two a step.
  std::map<std::string, double> kernels;
  for (const auto& r : j.at("rows")) kernels[r.at("phase").get<std::string>()] += r.at("kernels_per_step").get<double>();
  EXPECT_GT(kernels["forward"], 0) << j.dump();
  EXPECT_GT(kernels["backward"], 0) << j.dump();
  EXPECT_GT(kernels["optimizer"], 0) << j.dump();
  EXPECT_LE(kernels["unattributed"], 2.0) << j.dump();
  const std::string graphed_csv = test::slurp(csv);
  std::tie(rc, out) = test::run_command(common);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(", eager (--graph on"), std::string::npos) << out;
  // The eager profile's ops are the graph's: each (module, op, phase) of one is in the other.
  const std::string eager_csv = test::slurp(csv);
  // mnist_mlp's layers: one op, mlp, where the fused kernels take them (ops/fused/mlp.h), else linear's
  const std::string layers = graphed_csv.find("\"mlp\",forward") != std::string::npos ? "\"mlp\"" : "\"linear\"";
  for (const std::string& key : {layers + ",forward", layers + ",backward", std::string("\"RMSprop\",optimizer")}) {
    EXPECT_NE(graphed_csv.find(key), std::string::npos) << key << "\n" << graphed_csv;
    EXPECT_NE(eager_csv.find(key), std::string::npos) << key << "\n" << eager_csv;
  }
  for (const auto& p : {csv, json, png}) std::filesystem::remove(p);
}

