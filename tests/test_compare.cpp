// loupe compare: the flat JSON reader (good and malformed lines), the medians and ratios on
// hand-written JSONL, and the command on the metrics of two short CPU training runs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "test_util.h"
#include "instrument/compare.h"
#include "instrument/flat_json.h"

using namespace loupe;
using namespace loupe::instrument;

namespace {

using loupe::test::slurp;

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

// The error read_run throws for a file holding `text` ("" when none).
std::string read_error(const std::string& text) {
  const auto p = test::temp_path("compare_bad.jsonl");
  write(p, text);
  std::string err;
  try {
    read_run(p.string());
  } catch (const Error& e) {
    err = e.what();
  }
  std::filesystem::remove(p);
  return err;
}

std::string rec(const std::string& model, int epoch, double sps, const std::string& more = "") {
  return "{\"model\":\"" + model + "\",\"device\":\"cuda:0\",\"device_name\":\"NVIDIA H100\",\"precision\":\"fp32\","
         "\"batch\":128,\"epoch\":" + std::to_string(epoch) + ",\"samples\":1000,\"test_acc\":0.9,\"samples_per_sec\":" +
         std::to_string(sps) + more + ",\"advice\":[\"more workers, \\\"really\\\"\",{\"x\":[1,2]}]}\n";
}

}  // namespace

TEST(FlatJson, ReadsScalarsAndSkipsNestedValues) {
  std::string err;
  auto r = parse_flat_json(R"( {"a": "x\"y\\n\u0041", "b": -1.5e3, "c": null, "d": true, "e": false,
                               "f": [1, {"g": [2, "]"]}], "h": {}, "i": 0} )", &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(text_of(*r, "a"), "x\"y\\nA");
  EXPECT_EQ(number_of(*r, "b"), -1500.0);
  EXPECT_FALSE(number_of(*r, "c"));
  EXPECT_EQ(r->at("c").kind, JsonScalar::Kind::Null);
  EXPECT_EQ(r->at("d").kind, JsonScalar::Kind::Bool);
  EXPECT_EQ(r->at("d").number, 1);
  EXPECT_EQ(r->at("e").number, 0);
  EXPECT_EQ(r->at("f").kind, JsonScalar::Kind::Skipped);
  EXPECT_EQ(r->at("h").kind, JsonScalar::Kind::Skipped);
  EXPECT_EQ(number_of(*r, "i"), 0.0);
  EXPECT_FALSE(number_of(*r, "missing"));
  EXPECT_TRUE(parse_flat_json("{}", &err));
}

TEST(FlatJson, RefusesMalformedLinesSayingWhere) {
  for (const char* bad : {"", "[1]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":\"x}",
                          "{\"a\":tru}", "{\"a\":1.2.3}", "{\"a\":[1,2}", "{a:1}", "{\"a\":nan}", "{\"a\":\"\\q\"}"}) {
    std::string err;
    EXPECT_FALSE(parse_flat_json(bad, &err)) << bad;
    EXPECT_NE(err.find("at character"), std::string::npos) << bad << ": " << err;
  }
  // A number past double's range is nlohmann's out_of_range, not a parse error: still a refusal
  // (the fuzz target's corpus found it escaping as an exception).
  std::string err;
  EXPECT_FALSE(parse_flat_json("{\"a\": 1e999}", &err));
  EXPECT_NE(err.find("number overflow"), std::string::npos) << err;
}

// Files that are not what they claim: a line past 1 MiB is refused by number before it is all
// read, and a value nested a million deep is checked but not kept (no memory for its contents).
TEST(Compare, ReadRunBoundsWhatAHostileFileCosts) {
  EXPECT_NE(read_error(rec("m", 1, 10) + std::string(2 << 20, ' ') + "\n")
                .find("compare_bad.jsonl:2: a line longer than 1 MiB"),
            std::string::npos);
  const size_t deep = 1000000;
  std::string err;
  auto r = parse_flat_json("{\"a\":" + std::string(deep, '[') + std::string(deep, ']') + ",\"b\":2}", &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->at("a").kind, JsonScalar::Kind::Skipped);
  EXPECT_EQ(number_of(*r, "b"), 2.0);
  EXPECT_FALSE(parse_flat_json("{\"a\":" + std::string(deep, '[') + "}", &err));  // unbalanced: refused
}

TEST(Compare, ReadRunNamesTheFileAndLine) {
  EXPECT_NE(read_error(rec("m", 1, 10) + "\nnot json\n").find("compare_bad.jsonl:3: not a JSON object"),
            std::string::npos) << read_error(rec("m", 1, 10) + "\nnot json\n");
  EXPECT_NE(read_error("{\"a\":1}\n").find(":1: not a loupe record (no \"model\" field)"), std::string::npos);
  EXPECT_NE(read_error("").find("no records"), std::string::npos);
  try {
    read_run("/nonexistent/run.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read '/nonexistent/run.jsonl'"), std::string::npos) << e.what();
  }
}

// Medians over epochs 2.. (epoch 1 left out), null figures skipped, ratios to the first run.
TEST(Compare, MediansOverLaterEpochsAndRatiosToTheFirstRun) {
  const auto a = test::temp_path("compare_a.jsonl"), b = test::temp_path("compare_b.jsonl");
  write(a, rec("m", 1, 1) + rec("m", 2, 100, ",\"mfu\":0.1,\"gpu_busy_share\":null,\"energy_j\":50") +
               rec("m", 3, 300, ",\"mfu\":0.3,\"energy_j\":70") + rec("m", 4, 200, ",\"mfu\":null,\"energy_j\":60"));
  write(b, rec("m", 1, 400, ",\"mfu\":0.4,\"cost_per_million_samples\":2.5,\"achieved_tflops\":0.05,"
                            "\"host_cpu_util\":1.5,\"host_rss_bytes\":104857600"));
  std::vector<RunSummary> ra = summarize_run(read_run(a.string()), "A", std::nullopt);
  std::vector<RunSummary> rb = summarize_run(read_run(b.string()), "B", std::nullopt);
  ASSERT_EQ(ra.size(), 1u);
  EXPECT_EQ(ra[0].records, 3);
  EXPECT_EQ(ra[0].note, "median of epochs 2..4 (3 records)");
  EXPECT_DOUBLE_EQ(*ra[0].samples_per_sec, 200);
  EXPECT_DOUBLE_EQ(*ra[0].mfu_pct, 20);            // median of 10 and 30; the null left out
  EXPECT_FALSE(ra[0].busy_pct);                    // never measured: n/a, not 0
  EXPECT_DOUBLE_EQ(*ra[0].j_per_sample, 0.06);     // 60 J / 1000 samples
  EXPECT_FALSE(ra[0].cost_per_million);
  EXPECT_EQ(rb[0].note, "epoch 1 only (includes warm-up)");
  EXPECT_DOUBLE_EQ(*rb[0].cost_per_million, 2.5);  // the run's own figure
  std::string warning;
  std::vector<CompareSection> s = compare_sections({ra, rb}, &warning);
  EXPECT_EQ(warning, "");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(*ratio(s[0].rows[1].samples_per_sec, s[0].rows[0].samples_per_sec), 2.0);
  EXPECT_FALSE(ratio(s[0].rows[1].busy_pct, s[0].rows[0].busy_pct));
  const std::string table = format_section(s[0]);
  EXPECT_NE(table.find("200 (1.00x)"), std::string::npos) << table;
  EXPECT_NE(table.find("400 (2.00x)"), std::string::npos) << table;
  EXPECT_NE(table.find("40.0% (2.00x)"), std::string::npos) << table;
  EXPECT_EQ(table.find(" 0.0%"), std::string::npos) << table;
  // A price per run: cost per million samples from the median samples/s.
  std::vector<RunSummary> priced = summarize_run(read_run(a.string()), "A", 3.6);
  EXPECT_DOUBLE_EQ(*priced[0].cost_per_million, 3.6 / 3600 * 1e6 / 200);
  std::vector<std::string> rows = compare_csv_rows(s[0]);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1], "\"m, batch 128, fp32\",B,m,128,fp32,NVIDIA H100,1,epoch 1 only (includes warm-up),400,2,,,40,2,,,2.5,"
            ",50,,1.5,,100,");  // the CPU's figures (GFLOP/s, cores, MiB): A measured none, so no ratios
  // Runs of different models: compared, with a warning.
  std::vector<RunSummary> rc = summarize_run(read_run(b.string()), "C", std::nullopt);
  rc[0].model = "other";
  compare_sections({ra, rc}, &warning);
  EXPECT_NE(warning.find("different models (m / other)"), std::string::npos) << warning;
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

// The line of a table that starts with "  run " (its header).
std::string header_of(const std::string& table) {
  const size_t at = table.find("\n  run ");
  return at == std::string::npos ? "" : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
}

// A GPU-only section keeps the GPU's columns (all of them, n/a or not); one with a CPU run shows
// samples/s and the figures some run measured, the CPU's first, and no column n/a for every run.
TEST(Compare, ASectionWithACpuRunShowsTheFiguresSomeRunMeasured) {
  const auto g = test::temp_path("compare_mg.jsonl"), c = test::temp_path("compare_mc.jsonl");
  write(g, rec("m", 2, 1000, ",\"mfu\":0.1"));
  write(c, "{\"model\":\"m\",\"device\":\"cpu\",\"device_name\":\"CPU\",\"precision\":\"fp32\",\"batch\":128,"
           "\"epoch\":2,\"samples\":1000,\"samples_per_sec\":40,\"mfu\":null,\"achieved_tflops\":0.05,"
           "\"host_cpu_util\":1.5,\"host_rss_bytes\":104857600,\"host_cpu_wait_share\":null}\n");
  const RunSummary gpu = summarize_run(read_run(g.string()), "G", {})[0], cpu = summarize_run(read_run(c.string()), "C", {})[0];
  EXPECT_FALSE(gpu.cpu);
  EXPECT_TRUE(cpu.cpu);
  const std::string gpu_only = format_section(compare_sections({{gpu}, {gpu}}, nullptr)[0]);
  EXPECT_EQ(header_of(gpu_only), "  run  GPU              samples/s  busy            MFU  J/sample  $/M samples  records") << gpu_only;
  const std::string mixed = format_section(compare_sections({{gpu}, {cpu}}, nullptr)[0]);
  EXPECT_EQ(header_of(mixed), "  run  device           samples/s   GFLOP/s       cores       peak RSS            MFU  records") << mixed;
  EXPECT_NE(mixed.find("  50 (n/a)"), std::string::npos) << mixed;   // the GPU run measured no GFLOP/s
  EXPECT_NE(mixed.find("40 (0.04x)"), std::string::npos) << mixed;
  const std::string cpu_only = format_section(compare_sections({{cpu}, {cpu}}, nullptr)[0]);
  EXPECT_EQ(header_of(cpu_only), "  run  device   samples/s     GFLOP/s         cores         peak RSS  records") << cpu_only;
  std::filesystem::remove(g);
  std::filesystem::remove(c);
}

// Files of several (model, batch, precision) groups (bench --json over models) compare group by group.
TEST(Compare, SeveralGroupsAreComparedGroupByGroup) {
  const auto a = test::temp_path("compare_ga.jsonl"), b = test::temp_path("compare_gb.jsonl");
  write(a, rec("m1", 1, 10) + rec("m2", 1, 20));
  write(b, rec("m2", 1, 30) + rec("m1", 1, 40));
  std::string warning;
  auto s = compare_sections({summarize_run(read_run(a.string()), "A", {}), summarize_run(read_run(b.string()), "B", {})},
                            &warning);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].title, "m1, batch 128, fp32");
  EXPECT_DOUBLE_EQ(*s[0].rows[1].samples_per_sec, 40);
  EXPECT_EQ(s[1].rows[0].label, "A");
  EXPECT_DOUBLE_EQ(*s[1].rows[1].samples_per_sec, 30);
  EXPECT_EQ(warning, "");
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

// Two runs appended to one --metrics file (a run, then its --resume, or a second try) are two rows
// of the section, each its own median, named by run; never one median over both.
TEST(Compare, TwoRunsInOneFileAreTwoRows) {
  const auto a = test::temp_path("compare_runs.jsonl");
  const std::string r1 = ",\"run_id\":\"aaaaaa111111\",\"started_at\":\"2026-11-26T10:00:00Z\"",
                    r2 = ",\"run_id\":\"bbbbbb222222\",\"started_at\":\"2026-11-26T11:00:00Z\"";
  write(a, rec("m1", 1, 10, r1) + rec("m1", 2, 100, r1) + rec("m1", 3, 110, r1) + rec("m1", 1, 20, r2) +
               rec("m1", 2, 300, r2) + rec("m1", 3, 310, r2));
  const std::vector<RunSummary> s = summarize_run(read_run(a.string()), "A", {});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "A run aaaaaa (2026-11-26T10:00:00Z)");
  EXPECT_EQ(s[1].label, "A run bbbbbb (2026-11-26T11:00:00Z)");
  EXPECT_DOUBLE_EQ(*s[0].samples_per_sec, 105);  // epochs 2..3 of the first run only
  EXPECT_DOUBLE_EQ(*s[1].samples_per_sec, 305);
  // One run in the file (or records from before run ids): the file's label alone. A summary record
  // (--target-acc's, with its nested list of runs) is not an epoch: it is passed over.
  write(a, rec("m1", 1, 10, r1) + rec("m1", 2, 100, r1) +
               "{\"record\": \"time_to_accuracy\", \"target_acc\": 0.9, \"runs\": [{\"seed\": 1}]}\n");
  EXPECT_EQ(read_run(a.string()).size(), 2u);
  EXPECT_EQ(summarize_run(read_run(a.string()), "A", {}).at(0).label, "A");
  std::filesystem::remove(a);
}

// The command on the metrics of two short CPU training runs (two batches), and its errors.
TEST(Compare, TheCommandOnTwoCpuRuns) {
  const auto a = test::temp_path("cmp_a.jsonl"), b = test::temp_path("cmp_b.jsonl"), csv = test::temp_path("cmp.csv");
  auto run = [&](const std::string& args) { return test::run_command(std::string(LOUPE_CLI) + " " + args); };
  for (const auto& [path, batch] : {std::make_pair(a, "64"), std::make_pair(b, "128")}) {
    auto [rc, log] = run("train mnist_mlp --device cpu --synthetic --epochs 3 --max-steps 3 --plain --batch " +
                         std::string(batch) + " --metrics " + path.string());
    ASSERT_EQ(rc, 0) << log;
  }
  auto [rc, log] = run("compare " + a.string() + " " + b.string() + " --labels b64,b128 --price-per-hour 1,2 --csv " +
                       csv.string());
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("mnist_mlp, batch 64 / 128, fp32 (ratios: this run / b64)"), std::string::npos) << log;
  EXPECT_NE(log.find("median of epochs 2..3 (2 records)"), std::string::npos) << log;
  EXPECT_NE(log.find("b128  CPU"), std::string::npos) << log;
  EXPECT_NE(log.find("(1.00x)"), std::string::npos) << log;
  // All on the CPU: the CPU's figures, each with its ratio, and no GPU column. "waited" only where
  // the records measured it (host_cpu_wait_share, from the kernel's schedstat).
  const std::string header = header_of(log);
  const std::regex waited_measured("\"host_cpu_wait_share\":[0-9]");
  const bool waited = std::regex_search(slurp(a), waited_measured) || std::regex_search(slurp(b), waited_measured);
  EXPECT_TRUE(std::regex_search(header, std::regex(std::string("^  run +device +model, batch, precision +samples/s +") +
                                                   "GFLOP/s +cores +" + (waited ? "waited +" : "") +
                                                   "peak RSS +\\$/M samples +records$"))) << log;
  for (const char* gpu_column : {"busy", "MFU", "J/sample", "GPU"}) EXPECT_EQ(header.find(gpu_column), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(" MiB \\(1\\.00x\\)"))) << log;
  const std::string table = slurp(csv);
  EXPECT_EQ(table.rfind("section,label,model,batch,precision,gpu,records,note,samples_per_sec,", 0), 0u) << table;
  EXPECT_NE(table.find(",b128,mnist_mlp,128,fp32,CPU,2,"), std::string::npos) << table;
  std::tie(rc, log) = run("compare " + a.string());
  EXPECT_EQ(rc, 1);
  EXPECT_NE(log.find("needs at least two runs"), std::string::npos) << log;
  std::tie(rc, log) = run("compare " + a.string() + " " + b.string() + " --price-per-hour 1");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(log.find("--price-per-hour has 1 prices for 2 runs"), std::string::npos) << log;
  std::tie(rc, log) = run("compare " + a.string() + " /nonexistent/x.jsonl");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(log.find("cannot read '/nonexistent/x.jsonl'"), std::string::npos) << log;
  for (const auto& p : {a, b, csv}) std::filesystem::remove(p);
}
