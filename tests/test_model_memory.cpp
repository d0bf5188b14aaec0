// A model's memory estimated before it is built (models/memory.h; docs/reliability.md, "Memory
// checked first"): the estimate's arithmetic by hand, the host's free memory (cgroups, RLIMIT_AS),
// and a Session that refuses a layer past the machine's memory instead of dying in the allocator.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "loupe.h"
#include "models/keras_json.h"
#include "core/host_memory.h"
#include "models/memory.h"
#include "models/session.h"
#include "nn/layers.h"
#include "skip.h"
#include "test_util.h"

using namespace loupe;
using models::LayerCost;
using models::ModelInfo;

namespace {

// A model by hand: its costs as given, its recipe's optimizer, and a build that is one Linear of
// `in` x `out` weights (no bias), noting that it ran.
ModelInfo hand_model(std::vector<LayerCost> costs, const std::string& optimizer, int64_t in, int64_t out,
                     bool* built = nullptr) {
  ModelInfo m;
  m.name = "huge.json";
  m.recipe.optimizer = optimizer;
  m.recipe.batch = 128;
  m.costs = std::move(costs);
  m.build_for = [in, out, built](int64_t) {
    if (built) *built = true;
    auto s = std::make_shared<nn::Sequential>();
    s->add("dense_1", std::make_shared<nn::Linear>(in, out, false));
    return std::shared_ptr<nn::Module>(s);
  };
  return m;
}

const std::vector<LayerCost> kSmall = {{"dense_1", 1000, 64}, {"dense_2", 650, 10}};

}  // namespace

// Parameters, gradients and state are float32 at every precision; Adam and Adadelta keep two
// tensors, RMSprop and SGD one (SGD's momentum buffer exists at momentum 0); activations are
// kActivationFactor x the outputs per sample x the batch, 4 bytes in fp32 and 2 in bf16, where the
// parameters add a 2-byte compute copy.
TEST(ModelMemory, EstimateAddsTheParts) {
  const ModelInfo m = hand_model(kSmall, "adam", 1, 1);
  const models::MemoryEstimate adam = models::estimate_memory(m, 8, Precision::FP32, "adam");
  EXPECT_DOUBLE_EQ(adam.parameters, 1650 * 4);
  EXPECT_DOUBLE_EQ(adam.gradients, 1650 * 4);
  EXPECT_DOUBLE_EQ(adam.optimizer_state, 1650 * 8);
  EXPECT_DOUBLE_EQ(adam.activations_per_sample, 74 * 4 * 4);
  EXPECT_DOUBLE_EQ(adam.activations, 74 * 4 * 4 * 8);
  EXPECT_DOUBLE_EQ(adam.total(), 1650 * 16 + 74 * 4 * 4 * 8);
  EXPECT_EQ(adam.optimizer, "Adam");
  EXPECT_EQ(adam.largest_layer, "dense_1");
  EXPECT_EQ(adam.largest_parameters, 1000);
  EXPECT_EQ(adam.widest_layer, "dense_1");
  EXPECT_EQ(adam.widest_activations, 64);
  EXPECT_DOUBLE_EQ(models::estimate_memory(m, 8, Precision::FP32, "rmsprop").optimizer_state, 1650 * 4);
  EXPECT_DOUBLE_EQ(models::estimate_memory(m, 8, Precision::FP32, "sgd").optimizer_state, 1650 * 4);
  EXPECT_DOUBLE_EQ(models::estimate_memory(m, 8, Precision::FP32, "adadelta").optimizer_state, 1650 * 8);
  const models::MemoryEstimate bf16 = models::estimate_memory(m, 8, Precision::BF16, "rmsprop");
  EXPECT_DOUBLE_EQ(bf16.parameters, 1650 * 6);
  EXPECT_DOUBLE_EQ(bf16.gradients, 1650 * 4);
  EXPECT_DOUBLE_EQ(bf16.activations, 74 * 2 * 4 * 8);
  EXPECT_DOUBLE_EQ(models::estimate_memory(m, 8, Precision::TF32, "sgd").activations, 74 * 4 * 4 * 8);
}

// The refusal names the parts, the batch and the layer: the parameters' layer when they are what is
// past the memory, the widest output and the batch that fits when only the activations are.
TEST(ModelMemory, TheRefusalNamesTheLayerAndTheBatch) {
  const ModelInfo m = hand_model({{"dense_1", 784000000, 28000}, {"dense_2", 280010, 10}}, "adam", 1, 1);
  const models::MemoryEstimate e = models::estimate_memory(m, 128, Precision::FP32, "adam");
  EXPECT_EQ(models::memory_refusal(m, e, e.total(), "this machine has free"), "") << "exactly enough fits";
  EXPECT_EQ(models::memory_refusal(m, e, -1, "this machine has free"), "") << "unknown: not refused";
  const std::string why = models::memory_refusal(m, e, 7.8e9, "this machine has free");
  EXPECT_EQ(why,
            "huge.json: the model needs about 12.6 GB at --batch 128 (parameters 3.1 GB, gradients 3.1 GB, Adam's "
            "state 6.3 GB, activations 57 MB; the largest layer 'dense_1' has 784,000,000 parameters), more than "
            "the 7.8 GB this machine has free: a smaller layer (even --batch 1 would not fit)");

  // A 10^6-filter convolution: few parameters, outputs the batch cannot hold.
  const ModelInfo conv = hand_model({{"conv2d", 1000, 1000000 * 26 * 26}, {"dense", 100, 10}}, "rmsprop", 1, 1);
  const models::MemoryEstimate c = models::estimate_memory(conv, 128, Precision::FP32, "rmsprop");
  const double per_sample = 676000010.0 * 4 * 4;
  const double fixed = 1100 * 12;
  const std::string batch_helps = models::memory_refusal(conv, c, fixed + 5.5 * per_sample, "cuda:0 has free");
  EXPECT_NE(batch_helps.find("the largest layer 'conv2d' outputs 676,000,000 values per sample"), std::string::npos)
      << batch_helps;
  EXPECT_NE(batch_helps.find("cuda:0 has free: a smaller --batch helps: --batch 4 would fit"), std::string::npos)
      << batch_helps;
  // The batch named keeps a tenth of the memory spare and is cut to two significant digits: 46,088
  // samples fill 90% here.
  const models::MemoryEstimate big = models::estimate_memory(conv, 60000, Precision::FP32, "rmsprop");
  const std::string round = models::memory_refusal(conv, big, (fixed + 46088.5 * per_sample) / 0.9, "cuda:0 has free");
  EXPECT_NE(round.find("a smaller --batch helps: --batch 46000 would fit"), std::string::npos) << round;
  const std::string nothing_fits = models::memory_refusal(conv, c, fixed + 0.5 * per_sample, "this machine has free");
  EXPECT_NE(nothing_fits.find("'conv2d' outputs 676,000,000 values per sample), more than the 5.4 GB this machine "
                              "has free: a smaller layer (even --batch 1 would not fit)"),
            std::string::npos)
      << nothing_fits;
}

namespace {

// A made-up cgroup file system (tests/test_util.h) whose memory limits cgroup_memory_free reads.
struct CgroupTree : test::FakeCgroups {
  CgroupTree(const std::string& proc, const std::vector<std::pair<std::string, std::string>>& files)
      : FakeCgroups("memory_cgroup_tree", proc, files) {}
  double free() const { return loupe::cgroup_memory_free(proc(), sys()); }
};

}  // namespace

// cgroup v2: memory.max less memory.current, its inactive page cache not counted as used (the
// kernel reclaims it); a tighter parent wins; "max" is no limit. v1: the memory controller's
// limit_in_bytes less usage_in_bytes less total_inactive_file.
TEST(ModelMemory, TheCgroupsLimitLowersTheFreeMemory) {
  const std::string v2 = "0::/ci.slice/job-7\n";
  EXPECT_EQ(CgroupTree(v2, {{"ci.slice/job-7/memory.max", "8000"}, {"ci.slice/job-7/memory.current", "3000"}}).free(), 5000);
  EXPECT_EQ(CgroupTree(v2, {{"ci.slice/job-7/memory.max", "8000"},
                            {"ci.slice/job-7/memory.current", "3000"},
                            {"ci.slice/job-7/memory.stat", "active_file 5\ninactive_file 1000\nanon 2000"}})
                .free(),
            6000)
      << "the inactive page cache is free to take";
  EXPECT_EQ(CgroupTree(v2, {{"ci.slice/job-7/memory.max", "max"}, {"ci.slice/job-7/memory.current", "3000"},
                            {"ci.slice/memory.max", "4000"}, {"ci.slice/memory.current", "3500"}})
                .free(),
            500)
      << "the parent's limit";
  EXPECT_LT(CgroupTree(v2, {{"ci.slice/job-7/memory.max", "max"}, {"ci.slice/job-7/memory.current", "3000"}}).free(), 0);
  EXPECT_EQ(CgroupTree(v2, {{"ci.slice/job-7/memory.max", "1000"}, {"ci.slice/job-7/memory.current", "3000"}}).free(), 0);
  const std::string v1 = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n";
  EXPECT_EQ(CgroupTree(v1, {{"memory/docker/abc/memory.limit_in_bytes", "9000"},
                            {"memory/docker/abc/memory.usage_in_bytes", "4000"},
                            {"memory/docker/abc/memory.stat", "inactive_file 7\ntotal_inactive_file 500"}})
                .free(),
            5500);
  EXPECT_LT(CgroupTree("", {}).free(), 0) << "no cgroup: unknown";
}

// Tests run under RLIMIT_AS (tests/test_util.h): what the host can give counts it. The child
// sets the limit itself and allocates nothing past it, so this holds under AddressSanitizer too
// (whose terabytes of reserved shadow are already mapped, below the limit).
TEST(ModelMemory, AnAddressSpaceLimitLowersTheFreeMemory) {
  const size_t limit = size_t(1) << 30;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    const size_t cap = test::mapped_bytes() + limit;
    const rlimit rl{cap, cap};
    const std::string what = setrlimit(RLIMIT_AS, &rl) == 0 ? std::to_string(int64_t(loupe::host_memory_free())) : "x";
    const ssize_t wrote = write(fds[1], what.data(), what.size());
    _exit(wrote == ssize_t(what.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string what;
  char buf[64];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) what.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_FALSE(what.empty() || what == "x") << "setrlimit failed";
  const double free = std::stod(what);
  EXPECT_GT(free, 0.5 * double(limit)) << what;
  EXPECT_LE(free, double(limit)) << what;
}

// A layer no machine can hold is refused before the build begins, naming the layer and the batch.
TEST(ModelMemory, ASessionRefusesBeforeTheBuild) {
  bool built = false;
  const ModelInfo m = hand_model({{"dense_1", 1000000000000, 1000000}}, "adam", 1, 1, &built);
  try {
    models::SessionOptions so;
    so.batch = 64;
    models::Session s(m, so);
    FAIL() << "the session was made";
  } catch (const Error& e) {
    const std::string why = e.what();
    EXPECT_EQ(why.rfind("huge.json: the model needs about 16001.0 GB at --batch 64 (", 0), 0u) << why;
    EXPECT_NE(why.find("the largest layer 'dense_1' has 1,000,000,000,000 parameters"), std::string::npos) << why;
  }
  EXPECT_FALSE(built) << "the check runs before the model is built";
}

// A 784 M-parameter Dense under a 2 GiB address-space limit: the clear refusal, not the
// allocator's "out of host memory" half-way through; a small model builds under the same limit.
TEST(ModelMemory, AHugeDenseIsRefusedUnderALimit) {
  if (LOUPE_TEST_ASAN) LOUPE_SKIP_NOT_HERE << "AddressSanitizer's shadow memory leaves no room for RLIMIT_AS (tests/test_util.h)";
  const size_t limit = size_t(2) << 30;
  const ModelInfo huge = hand_model({{"dense_1", 784000000, 28000}}, "adam", 28000, 28000);
  const std::string what = test::run_with_memory_limit([&] { models::Session s(huge); }, limit);
  EXPECT_EQ(what.rfind("error: huge.json: the model needs about 12.6 GB at --batch 128 (", 0), 0u) << what;
  EXPECT_NE(what.find("the largest layer 'dense_1' has 784,000,000 parameters), more than the"), std::string::npos)
      << what;
  const ModelInfo small = hand_model({{"dense_1", 1000 * 1000, 1000}}, "adam", 1000, 1000);
  EXPECT_EQ(test::run_with_memory_limit([&] { models::Session s(small); }, limit), "ok");
}

namespace {

// A Keras file (Keras 3's model.to_json(), the keys the reader looks at): an input of `input` and
// one layer, compiled with Adam.
std::string keras_file(const std::string& input, const std::string& layer) {
  return R"({"class_name": "Sequential", "config": {"name": "sequential", "layers": [
    {"class_name": "InputLayer", "config": {"name": "input_layer", "batch_shape": [null, )" + input + R"(]}},
    )" + layer + R"(]}, "compile_config": {"optimizer": {"class_name": "Adam", "config": {}},
    "loss": "categorical_crossentropy"}})";
}

}  // namespace

// The reader's costs reach the check: a 784 M-parameter Dense (inside the reader's cap) and a
// Conv2D of 10^6 filters, whose output no batch holds, are refused by name under a 2 GiB limit
// before a weight is allocated.
TEST(ModelMemory, AKerasFilesHugeLayersAreRefusedUnderALimit) {
  if (LOUPE_TEST_ASAN) LOUPE_SKIP_NOT_HERE << "AddressSanitizer's shadow memory leaves no room for RLIMIT_AS (tests/test_util.h)";
  const size_t limit = size_t(2) << 30;
  const ModelInfo dense = models::keras_model(
      keras_file("28000", R"({"class_name": "Dense", "config": {"name": "dense_1", "units": 28000,
        "activation": "softmax", "use_bias": true}})"),
      "dense.json");
  const std::string what = test::run_with_memory_limit([&] { models::Session s(dense); }, limit);
  EXPECT_EQ(what.rfind("error: dense.json: the model needs about 12.6 GB at --batch 32 (parameters 3.1 GB, ", 0), 0u)
      << what;
  EXPECT_NE(what.find("the largest layer 'dense_1' has 784,028,000 parameters), more than the"), std::string::npos)
      << what;
  const ModelInfo conv = models::keras_model(
      keras_file("28, 28, 1", R"({"class_name": "Conv2D", "config": {"name": "conv2d", "filters": 1000000,
        "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format": "channels_last",
        "activation": "relu", "use_bias": true}}, {"class_name": "MaxPooling2D", "config": {"name": "pool",
        "pool_size": [26, 26], "strides": [26, 26], "padding": "valid", "data_format": "channels_last"}},
        {"class_name": "Flatten", "config": {"name": "flatten"}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 10, "activation": "softmax"}})"),
      "conv.json");
  const std::string wide = test::run_with_memory_limit([&] { models::Session s(conv); }, limit);
  EXPECT_EQ(wide.rfind("error: conv.json: the model needs about ", 0), 0u) << wide;
  EXPECT_NE(wide.find("the largest layer 'conv2d' outputs 676,000,000 values per sample"), std::string::npos) << wide;
  EXPECT_NE(wide.find("a smaller layer (even --batch 1 would not fit)"), std::string::npos) << wide;
}

// The margin: the reference models, whose costs come through the Keras reader, are far from any
// machine's memory at their recipes' batches, and build under the tests' 2 GiB limit.
TEST(ModelMemory, TheReferenceModelsAreNeverRefused) {
  for (const ModelInfo& m : models::all_models()) {
    ASSERT_FALSE(m.costs.empty()) << m.name;
    int64_t params = 0;
    for (const LayerCost& c : m.costs) params += c.parameters;
    EXPECT_EQ(params, m.expected_parameters) << m.name;
    const models::MemoryEstimate e = models::estimate_memory(m, m.recipe.batch, Precision::FP32, m.recipe.optimizer);
    EXPECT_LT(e.total(), 1e9) << m.name;
    EXPECT_EQ(models::memory_refusal(m, e, loupe::host_memory_free(), "this machine has free"), "") << m.name;
  }
  if (LOUPE_TEST_ASAN) return;  // no RLIMIT_AS under AddressSanitizer (tests/test_util.h)
  const ModelInfo& mlp = models::find_model("mnist_mlp");
  EXPECT_EQ(test::run_with_memory_limit([&] { models::Session s(mlp); }, size_t(2) << 30), "ok");
}
