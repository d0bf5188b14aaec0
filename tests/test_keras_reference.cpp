// The golden check of Keras's maths without Keras (docs/keras.md, "Weights"): each model file that
// tests/keras_reference.py writes, with its weights as Keras names them, gives on its input what
// NumPy computes from Keras's published formulas (tests/keras_reference.py's y.npy).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/h5.h"
#include "data/npy.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "models/keras_layers.h"
#include "models/keras_weights.h"
#include "test_util.h"

using namespace loupe;
namespace fs = std::filesystem;

namespace {
fs::path g_dir;
bool g_written = false;

// The reference's files, written once for the process (Debian's python3 with NumPy, as the
// scripts/ use it).
class ReferenceFiles : public ::testing::Environment {
 public:
  void SetUp() override {
    g_dir = fs::temp_directory_path() / ("loupe_keras_reference_" + std::to_string(::getpid()));
    fs::create_directories(g_dir);
    const std::string cmd = "/usr/bin/python3 '" + std::string(LOUPE_SOURCE_DIR) + "/tests/keras_reference.py' '" + g_dir.string() + "'";
    g_written = std::system(cmd.c_str()) == 0;
  }
  void TearDown() override { fs::remove_all(g_dir); }
};
const auto* const g_files = ::testing::AddGlobalTestEnvironment(new ReferenceFiles);

class KerasReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!g_written) GTEST_SKIP() << "tests/keras_reference.py did not run (/usr/bin/python3 with NumPy: tools/setup.sh installs it)";
  }
};
class KerasWeights : public KerasReference {};
class KerasArchive : public KerasReference {};

Tensor tensor_of(const data::NpyArray& a) {
  const Shape s{std::vector<int64_t>(a.shape)};
  if (a.type == data::NpyType::I32) {
    Tensor t = empty(s, DType::i32);
    std::copy(a.bytes.begin(), a.bytes.end(), static_cast<uint8_t*>(t.data_ptr()));
    return t;
  }
  EXPECT_EQ(a.type, data::NpyType::F32);
  Tensor t = empty(s);
  std::copy(a.bytes.begin(), a.bytes.end(), static_cast<uint8_t*>(t.data_ptr()));
  return t;
}

std::string file_name(const models::KerasVariable& v) {
  std::string n = v.layer + "__" + v.name;
  for (size_t p; (p = n.find('/')) != std::string::npos;) n.replace(p, 1, "__");
  return n + ".npy";
}

// The case's model with its weights, in evaluation mode.
std::shared_ptr<nn::Module> built(const fs::path& dir, models::ModelInfo& info) {
  info = models::load_keras_model((dir / "model.json").string());
  auto model = info.build();
  models::load_keras_weights(*model, info, [&](const models::KerasVariable& v) {
    return tensor_of(data::read_npy((dir / file_name(v)).string()));
  });
  model->eval();
  return model;
}
}  // namespace

TEST_P(KerasReference, OutputIsNumPysFromKerasFormulas) {
  const fs::path dir = g_dir / GetParam();
  models::ModelInfo info;
  auto model = built(dir, info);
  const Tensor x = tensor_of(data::read_npy((dir / "x.npy").string()));
  const Tensor want = tensor_of(data::read_npy((dir / "y.npy").string()));
  NoGradGuard no_grad;
  const Tensor got = model->forward(x);
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-4 * std::max(1.0f, std::fabs(w[i]))) << "output " << i;
}

// The same weights from Keras 2's .h5 files, as `model.save` writes them (under model_weights/)
// and as `save_weights` does (at the root), and from Keras 3's .weights.h5 and .keras files.
TEST_P(KerasReference, KerasWeightFilesGiveTheSameOutput) {
  const fs::path dir = g_dir / GetParam();
  if (!data::h5_supported()) GTEST_SKIP() << "built without libhdf5 (libhdf5-dev: tools/setup.sh installs it)";
  ASSERT_TRUE(fs::exists(dir / "model.h5")) << "tests/keras_reference.py wrote no .h5 (python3-h5py: tools/setup.sh installs it)";
  models::ModelInfo info;
  auto want = built(dir, info);
  NoGradGuard no_grad;
  const Tensor x = tensor_of(data::read_npy((dir / "x.npy").string()));
  const std::vector<float> expected = want->forward(x).to_vector<float>();
  for (const char* file : {"model.h5", "weights.h5", "model.weights.h5", "model.keras"}) {
    if (!fs::exists(dir / file)) continue;  // no .keras of a Keras 2 model Keras 3 cannot express
    auto model = info.build();
    models::load_keras_weights_file(*model, info, (dir / file).string());
    model->eval();
    EXPECT_EQ(model->forward(x).to_vector<float>(), expected) << file;
  }
}

// A .keras file is the model and its weights: its config.json gives the model, its
// model.weights.h5 the weights that give NumPy's output.
TEST_P(KerasArchive, AKerasFileIsTheModelWithItsWeights) {
  if (!data::h5_supported() || !data::npz_supported()) GTEST_SKIP() << "built without libhdf5 or libzip (tools/setup.sh installs them)";
  const fs::path dir = g_dir / GetParam();
  const std::string file = (dir / "model.keras").string();
  const models::ModelInfo info = models::load_keras_model(file);
  EXPECT_EQ(info.own_weights, file);
  EXPECT_EQ(models::model_stem(file), "model");
  auto model = info.build();
  models::load_keras_weights_file(*model, info, info.own_weights);
  model->eval();
  NoGradGuard no_grad;
  const std::vector<float> got = model->forward(tensor_of(data::read_npy((dir / "x.npy").string()))).to_vector<float>();
  const std::vector<float> want = tensor_of(data::read_npy((dir / "y.npy").string())).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "output " << i;
}

// A .keras file loupe writes (docs/keras.md, "Weights out"): Keras 3's layout, every variable at the
// path and with the shape and dtype Keras 3 gives it (tests/keras_layout.py compares it with the
// reference's file), and read back, the model with the same weights, bit for bit.
TEST_P(KerasArchive, ASavedKerasFileIsKerasLayoutAndReadsBack) {
  if (!data::h5_supported() || !data::npz_supported()) GTEST_SKIP() << "built without libhdf5 or libzip (tools/setup.sh installs them)";
  const fs::path dir = g_dir / GetParam();
  const std::string file = (dir / "model.keras").string(), saved = (dir / "saved.keras").string();
  const models::ModelInfo info = models::load_keras_model(file);
  auto model = info.build();
  models::load_keras_weights_file(*model, info, file);
  models::save_keras_file(*model, info, saved);
  const std::string cmd = "/usr/bin/python3 '" + std::string(LOUPE_SOURCE_DIR) + "/tests/keras_layout.py' '" + file + "' '" + saved + "'";
  auto [rc, out] = test::run_command(cmd);
  EXPECT_EQ(rc, 0) << out;
  const models::ModelInfo again = models::load_keras_model(saved);
  EXPECT_EQ(again.identity, info.identity);
  auto read = again.build();
  models::load_keras_weights_file(*read, again, saved);
  const auto want = model->named_parameters(), got = read->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].second.to_vector<float>(), want[i].second.to_vector<float>()) << want[i].first;
  const auto want_b = model->named_buffers(), got_b = read->named_buffers();
  ASSERT_EQ(got_b.size(), want_b.size());
  for (size_t i = 0; i < want_b.size(); ++i)
    EXPECT_EQ(got_b[i].second.to_vector<float>(), want_b[i].second.to_vector<float>()) << want_b[i].first;
}

namespace {
// A reference model's file read as a user's (Keras's one LSTM bias), and its model.
models::ModelInfo user_file(const std::string& name) {
  std::ifstream f(std::string(LOUPE_SOURCE_DIR) + "/models/keras/" + name + ".json");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return models::keras_model(text, name + ".json");
}
}  // namespace

// keras_arrays is the inverse of loading, for layers past the index code's first digit (4,096
// elements: cifar10_cnn's Dense of 2,304 x 512 after a Flatten, imdb_bilstm's Embedding and LSTMs):
// another model loaded from the arrays is the first, bit for bit.
TEST(KerasArrays, AreTheInverseOfLoading) {
  for (const char* name : {"cifar10_cnn", "imdb_bilstm"}) {
    const models::ModelInfo info = user_file(name);
    manual_seed(1);
    auto model = info.build();
    const std::vector<Tensor> arrays = models::keras_arrays(*model, info);
    const auto vars = models::keras_variables(info);
    ASSERT_EQ(arrays.size(), vars.size());
    manual_seed(2);
    auto other = info.build();
    size_t k = 0;
    models::load_keras_weights(*other, info, [&](const models::KerasVariable& v) {
      EXPECT_EQ(arrays[k].shape(), Shape(v.shape)) << v.layer << "/" << v.name;
      return arrays[k++];
    });
    const auto want = model->named_parameters(), got = other->named_parameters();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i].second.to_vector<float>(), want[i].second.to_vector<float>()) << name << ": " << want[i].first;
  }
}

// What Keras's variables cannot hold is refused by layer: an LSTM whose second bias (cuDNN's b_R,
// held at zero for a Keras file) is not zero.
TEST(KerasArrays, ASecondLstmBiasIsRefusedByName) {
  const models::ModelInfo info = user_file("imdb_bilstm");
  auto model = info.build();
  std::string lstm;
  for (const auto& [step, w] : info.keras_weights)
    if (w->cls == "Bidirectional") lstm = step + ".weight";
  for (auto& [n, t] : model->named_parameters())
    if (n == lstm) copy_(t, full(t.shape(), 0.5));
  try {
    models::keras_arrays(*model, info);
    FAIL() << "written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds what Keras's variables cannot (a second bias"), std::string::npos) << e.what();
  }
}

// tests/keras_reference.py's cases; those with a .keras file are all but the Keras 2 models with
// Keras 2's hard_sigmoid (Keras 3 has no such activation).
namespace {
const std::vector<std::string> kCases{"mlp",         "cnn",            "average_pool", "lstm",   "bidirectional",
                                      "lstm_hard_keras2", "lstm_hard_keras3", "activations", "global_average",
                                      "global_max",  "conv1d", "residual", "inception", "merges", "same_padding",
                                      "gru_keras2", "gru_keras3", "simple_rnn", "time_distributed",
                                      "lstm_backwards", "mask_zero", "activations_keras2", "activations_keras3",
                                      "masking", "repeat_permute", "bidirectional_masked",
                                      "time_distributed_conv", "states_keras2", "states_keras3", "permute_image"};
std::vector<std::string> archive_cases() {
  std::vector<std::string> c;
  for (const std::string& name : kCases)
    if (name != "lstm_hard_keras2" && name != "gru_keras2" && name != "activations_keras2") c.push_back(name);
  return c;
}
}  // namespace
INSTANTIATE_TEST_SUITE_P(Cases, KerasReference, ::testing::ValuesIn(kCases));
INSTANTIATE_TEST_SUITE_P(Cases, KerasArchive, ::testing::ValuesIn(archive_cases()));

// The variables a model file's layers hold, in Keras's order, with Keras's shapes.
TEST_F(KerasWeights, VariablesAreKerasNamesAndShapes) {
  const models::ModelInfo info = models::load_keras_model((g_dir / "bidirectional" / "model.json").string());
  std::vector<std::string> names;
  for (const auto& v : models::keras_variables(info)) names.push_back(v.layer + "/" + v.name + dims_text(v.shape));
  const std::vector<std::string> want = {
      "bi1/forward_lstm_1/kernel[3, 16]",  "bi1/forward_lstm_1/recurrent_kernel[4, 16]",  "bi1/forward_lstm_1/bias[16]",
      "bi1/backward_lstm_1/kernel[3, 16]", "bi1/backward_lstm_1/recurrent_kernel[4, 16]", "bi1/backward_lstm_1/bias[16]",
      "bi2/forward_lstm_2/kernel[8, 8]",   "bi2/forward_lstm_2/recurrent_kernel[2, 8]",   "bi2/forward_lstm_2/bias[8]",
      "bi2/backward_lstm_2/kernel[8, 8]",  "bi2/backward_lstm_2/recurrent_kernel[2, 8]",  "bi2/backward_lstm_2/bias[8]",
      "out/kernel[4, 2]",                  "out/bias[2]"};
  EXPECT_EQ(names, want);
}

// An array of another shape than the layer's is refused naming the layer and the variable.
TEST_F(KerasWeights, AWeightOfAnotherShapeNamesTheLayer) {
  const models::ModelInfo info = models::load_keras_model((g_dir / "mlp" / "model.json").string());
  auto model = info.build();
  try {
    models::load_keras_weights(*model, info, [](const models::KerasVariable& v) {
      return zeros(v.name == "bias" && v.layer == "out" ? Shape{4} : Shape{v.shape});
    });
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'out': its weight bias is [4] float32; the model's is [3] float32"), std::string::npos)
        << e.what();
  }
}

// Weight files that are not what the model needs (tests/keras_reference.py's hostile_files): each
// refused with its sentence, naming the file; a dataset of 10^12 declared floats without
// allocating them.
TEST_F(KerasWeights, WrongFilesAreRefusedInOneSentence) {
  const fs::path dir = g_dir / "hostile";
  if (!data::h5_supported()) GTEST_SKIP() << "built without libhdf5 (libhdf5-dev: tools/setup.sh installs it)";
  ASSERT_TRUE(fs::exists(dir)) << "tests/keras_reference.py wrote no .h5 (python3-h5py: tools/setup.sh installs it)";
  const models::ModelInfo info = models::load_keras_model((g_dir / "mlp" / "model.json").string());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".h5") continue;
    ++files;
    fs::path said = e.path();
    std::ifstream in(said.replace_extension(".txt"));
    const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto model = info.build();
    try {
      models::load_keras_weights_file(*model, info, e.path().string());
      ADD_FAILURE() << e.path() << ": loaded";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).rfind(e.path().string() + ": ", 0), 0u) << err.what();
      EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
    }
  }
  EXPECT_EQ(files, 13);
  // A .keras file without one of its members.
  auto model = info.build();
  try {
    models::load_keras_weights_file(*model, info, (dir / "no_weights.keras").string());
    ADD_FAILURE() << "no_weights.keras: loaded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("no_weights.keras: has no model.weights.h5"), std::string::npos) << err.what();
  }
  try {
    models::load_keras_model((dir / "no_config.keras").string());
    ADD_FAILURE() << "no_config.keras: read";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("no_config.keras: has no config.json"), std::string::npos) << err.what();
  }
  try {
    models::load_keras_model((dir / "not_hdf5.h5").string() + ".keras");
    ADD_FAILURE() << "a missing .keras file: read";
  } catch (const Error&) {
  }
}

// A .keras member past what loupe reads from it (config.json: 16 MiB) is refused by its declared
// size before it is inflated, though it compresses to kilobytes.
TEST_F(KerasWeights, AKerasFileOverItsCapIsRefused) {
  if (!data::npz_supported()) GTEST_SKIP() << "built without libzip (libzip-dev: tools/setup.sh installs it)";
  try {
    models::load_keras_model((g_dir / "hostile" / "big_config.keras").string());
    FAIL() << "read";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("config.json: 17,825,794 bytes, more than loupe reads from it"), std::string::npos)
        << err.what();
  }
}

// Not a regular file: refused before it is opened (a FIFO would block the open).
TEST_F(KerasWeights, AFifoIsRefusedBeforeItIsOpened) {
  if (!data::h5_supported()) GTEST_SKIP() << "built without libhdf5 (libhdf5-dev: tools/setup.sh installs it)";
  const fs::path fifo = g_dir / "weights.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const models::ModelInfo info = models::load_keras_model((g_dir / "mlp" / "model.json").string());
  auto model = info.build();
  try {
    models::load_keras_weights_file(*model, info, fifo.string());
    FAIL() << "opened";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("FIFO"), std::string::npos) << err.what();
  }
}

// As a user: `loupe eval` of a model file with Keras's weights gives the accuracy they imply
// (150 of 200 labels are the NumPy forward's predictions), and `loupe train` starts from them.
TEST_F(KerasWeights, TheCommandEvaluatesAndTrainsFromKerasWeights) {
  if (!data::h5_supported()) GTEST_SKIP() << "built without libhdf5 (libhdf5-dev: tools/setup.sh installs it)";
  const fs::path dir = g_dir / "mlp";
  const std::string model = (dir / "model.json").string(), data = " --data " + (dir / "data").string() + " --device cpu";
  for (const char* file : {"model.h5", "model.weights.h5"}) {
    const std::string weights = (dir / file).string();
    auto [rc, out] = test::run_command(std::string(LOUPE_CLI) + " eval " + model + " --weights " + weights + data);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("with the weights of " + weights + ", on "), std::string::npos) << out;
    EXPECT_NE(out.find("test accuracy 75.00%"), std::string::npos) << out;
  }
  // A .keras file evaluates and trains from its own weights.
  const std::string archive = (dir / "model.keras").string();
  auto [rc_k, out_k] = test::run_command(std::string(LOUPE_CLI) + " eval " + archive + data);
  EXPECT_EQ(rc_k, 0) << out_k;
  EXPECT_NE(out_k.find("with the weights of " + archive + ", on "), std::string::npos) << out_k;
  EXPECT_NE(out_k.find("test accuracy 75.00%"), std::string::npos) << out_k;
  auto [rc_t, out_t] = test::run_command(std::string(LOUPE_CLI) + " train " + archive + data + " --epochs 1 --plain --no-nvml");
  EXPECT_EQ(rc_t, 0) << out_t;
  EXPECT_NE(out_t.find("weights from " + archive + " (Keras)"), std::string::npos) << out_t;
  const std::string weights = (dir / "model.h5").string();
  auto [rc, out] = test::run_command(std::string(LOUPE_CLI) + " train " + model + " --weights " + weights + data +
                                     " --epochs 1 --plain --no-nvml");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("weights from " + weights + " (Keras)"), std::string::npos) << out;
  auto [rc2, out2] = test::run_command(std::string(LOUPE_CLI) + " eval " + model + data);
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("--weights FILE"), std::string::npos) << out2;
  auto [rc3, out3] = test::run_command(std::string(LOUPE_CLI) + " train " + model + " --weights " + weights + data +
                                       " --save " + weights);
  EXPECT_NE(rc3, 0);
  EXPECT_NE(out3.find("the --weights file"), std::string::npos) << out3;
}

// The last figure of `loupe train`'s epoch lines or of `loupe eval`'s line: "test accuracy 75.00%".
std::string last_test_accuracy(const std::string& out) {
  const size_t at = out.rfind("test accuracy ");
  return at == std::string::npos ? "" : out.substr(at + 14, out.find('%', at) - at - 14);
}

// As a user: `loupe train --save-keras` hands the trained model back as a .keras file, which `loupe
// eval` reads to the accuracy the run ended with; a reference model, or a name without .keras, is
// refused before any work.
TEST_F(KerasWeights, TheCommandSavesAKerasFileThatEvaluatesTheSame) {
  if (!data::h5_supported() || !data::npz_supported()) GTEST_SKIP() << "built without libhdf5 or libzip (tools/setup.sh installs them)";
  const fs::path dir = g_dir / "mlp";
  const std::string data = " --data " + (dir / "data").string() + " --device cpu", saved = (g_dir / "trained.keras").string();
  auto [rc, out] = test::run_command(std::string(LOUPE_CLI) + " train " + (dir / "model.json").string() + " --weights " +
                                     (dir / "model.h5").string() + data + " --epochs 2 --plain --no-nvml --save-keras " + saved);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("wrote " + saved + " (Keras 3's .keras"), std::string::npos) << out;
  const std::string trained = last_test_accuracy(out);
  ASSERT_FALSE(trained.empty()) << out;
  auto [rc_e, out_e] = test::run_command(std::string(LOUPE_CLI) + " eval " + saved + data);
  EXPECT_EQ(rc_e, 0) << out_e;
  EXPECT_EQ(last_test_accuracy(out_e), trained) << out << out_e;
  auto [rc_r, out_r] = test::run_command(std::string(LOUPE_CLI) + " train mnist_mlp --synthetic --max-steps 1 --save-keras " + saved);
  EXPECT_NE(rc_r, 0);
  EXPECT_NE(out_r.find("mnist_mlp is not a model file with weights"), std::string::npos) << out_r;
  auto [rc_x, out_x] = test::run_command(std::string(LOUPE_CLI) + " train " + (dir / "model.json").string() + data + " --save-keras " +
                                         (g_dir / "trained.h5").string());
  EXPECT_NE(rc_x, 0);
  EXPECT_NE(out_x.find("Keras 3's model files end in .keras"), std::string::npos) << out_x;
}
