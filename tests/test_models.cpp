// The reference models: parameter counts against the reference, an output shape, and each shipped
// recipe against the table of docs/reference-models.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/cifar_dataset.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "models/session.h"

using namespace loupe;

TEST(Models, ParameterCountsMatchTheReference) {
  for (const auto& info : models::all_models()) {
    auto m = info.build();
    EXPECT_EQ(m->num_parameters(), info.expected_parameters) << info.name;
  }
}

TEST(Models, MnistCnnOutputShape) {
  auto m = models::find_model("mnist_cnn").build();
  m->eval();
  NoGradGuard g;
  EXPECT_EQ((*m)(full(Shape{2, 28, 28}, 0.5)).shape(), (Shape{2, 10}));
}

namespace {

// One row of docs/reference-models.md's table of the six models.
struct Row {
  std::string name, layers, recipe;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The rows whose first cell is a model's name in backticks ("| `mnist_mlp` | layers | recipe |").
std::vector<Row> table_rows() {
  std::ifstream in(std::string(LOUPE_SOURCE_DIR) + "/docs/reference-models.md");
  EXPECT_TRUE(in.good()) << "docs/reference-models.md cannot be read";
  std::vector<Row> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    for (std::string cell; std::getline(ss, cell, '|');) cells.push_back(trim(cell));
    if (cells.size() < 3) continue;
    rows.push_back({cells[0].substr(1, cells[0].size() - 2), cells[1], cells[2]});
  }
  return rows;
}

// The number a cell puts after `key` ("lr 1e-4", "rho .95", "batch 32") or before it ("20 epochs",
// "1,250,858 parameters"); nullopt where the cell does not say.
std::optional<double> after(const std::string& cell, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(cell, m, std::regex("\\b" + key + " ([0-9]*\\.?[0-9]+(e-?[0-9]+)?)"))) return std::nullopt;
  return std::stod(m[1]);
}
std::optional<double> before(const std::string& cell, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(cell, m, std::regex("([0-9][0-9,]*) " + key))) return std::nullopt;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  return std::stod(digits);
}

// The optimizer and its settings as the row states them; what it does not state, Keras's defaults
// (RMSprop rho .9, Adam beta1 .9 and beta2 .999, Adadelta rho .95; eps 1e-7 for all three; no
// decay, no momentum), which is what the recipe must then hold.
void expect_optimizer(const Row& row, const models::Recipe& r) {
  std::string opt = row.recipe.substr(0, row.recipe.find(' '));
  std::transform(opt.begin(), opt.end(), opt.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  ASSERT_EQ(r.optimizer, opt);
  ASSERT_TRUE(after(row.recipe, "lr")) << "the table states every recipe's lr: " << row.recipe;
  EXPECT_DOUBLE_EQ(r.lr, *after(row.recipe, "lr"));
  EXPECT_DOUBLE_EQ(r.eps, after(row.recipe, "eps").value_or(1e-7));
  EXPECT_DOUBLE_EQ(r.decay, after(row.recipe, "decay").value_or(0.0));
  EXPECT_EQ(r.momentum, 0.0);
  if (opt == "rmsprop" || opt == "adadelta")
    EXPECT_DOUBLE_EQ(r.rho, after(row.recipe, "rho").value_or(opt == "rmsprop" ? 0.9 : 0.95));
  if (opt == "adam") {
    EXPECT_DOUBLE_EQ(r.beta1, after(row.recipe, "beta1").value_or(0.9));
    EXPECT_DOUBLE_EQ(r.beta2, after(row.recipe, "beta2").value_or(0.999));
  }
}

// The table's augmentation ("random shift up to 10% of width and height (±3 px) and horizontal
// flip") against what the CIFAR-10 loader draws: shifts reach the stated pixels and no further,
// and both flips occur.
void expect_augmentation(const Row& row) {
  std::smatch pct, px;
  ASSERT_TRUE(std::regex_search(row.recipe, pct, std::regex("shift up to ([0-9]+)%"))) << row.recipe;
  ASSERT_TRUE(std::regex_search(row.recipe, px, std::regex("±([0-9]+) px"))) << row.recipe;
  ASSERT_NE(row.recipe.find("horizontal flip"), std::string::npos) << row.recipe;
  const int side = 32, shift = std::stoi(px[1]);
  EXPECT_EQ(shift, int(std::lround(std::stod(pct[1]) / 100 * side)));
  int most = 0, flips = 0;
  const int n = 4000;
  for (uint64_t r = 0; r < uint64_t(n); ++r) {
    int dx, dy;
    bool flip;
    data::CifarDataset::draw_augmentation(r * 0x9E3779B97F4A7C15ull, &dx, &dy, &flip);
    most = std::max({most, std::abs(dx), std::abs(dy)});
    flips += flip;
  }
  EXPECT_EQ(most, shift);
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, n);
}

}  // namespace

// Every shipped recipe is the table's: the C++ recipe (models/reference_models.cpp) in full, what
// the model's session hands its optimizer, and the optimizer of each file's compile config
// (models/keras/NAME.json; batch and epochs are not a compile config's). The files are checked
// against the C++ definitions elsewhere (test_keras_json), which hands both the same recipe: only
// the table can catch a recipe that is wrong in both.
TEST(Models, RecipesAreTheTable) {
  const std::vector<Row> rows = table_rows();
  std::set<std::string> in_table, shipped;
  for (const Row& row : rows) in_table.insert(row.name);
  for (const auto& info : models::all_models()) shipped.insert(info.name);
  ASSERT_EQ(in_table, shipped) << "docs/reference-models.md's table names every reference model once";
  ASSERT_EQ(rows.size(), shipped.size());
  int compile_configs = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const models::ModelInfo& ref = models::find_model(row.name);
    const models::Recipe& r = ref.recipe;
    expect_optimizer(row, r);
    EXPECT_EQ(r.batch, after(row.recipe, "batch").value_or(-1));
    EXPECT_EQ(r.epochs, before(row.recipe, "epochs").value_or(-1));
    if (auto p = before(row.recipe, "parameters")) EXPECT_EQ(ref.expected_parameters, int64_t(*p));
    const bool sigmoid = row.layers.find("sigmoid") != std::string::npos;
    EXPECT_EQ(r.loss, sigmoid ? train::Loss::BinaryCrossEntropyWithLogits : train::Loss::CrossEntropy);
    const bool augmented = row.recipe.find("augmentation") != std::string::npos;
    EXPECT_EQ(r.augment, augmented);
    if (augmented) expect_augmentation(row);

    const models::ModelInfo file =
        models::load_keras_model(std::string(LOUPE_SOURCE_DIR) + "/models/keras/" + row.name + ".json");
    EXPECT_EQ(file.recipe.dataset, r.dataset);  // the data set the file's input shape implies
    if (auto maxlen = after(row.recipe, "maxlen"))
      EXPECT_EQ(file.input_shape, (std::vector<int64_t>{int64_t(*maxlen)}));
    if (auto window = after(row.layers, "window")) {
      ASSERT_FALSE(file.input_shape.empty());
      EXPECT_EQ(file.input_shape[0], int64_t(*window));
    }
    if (file.recipe_source.rfind("the optimizer and loss from the file's compile_config", 0) == 0) {
      SCOPED_TRACE("the compile config of models/keras/" + row.name + ".json");
      expect_optimizer(row, file.recipe);
      ++compile_configs;
    }

    models::SessionOptions o;
    o.vocab = ref.vocab > 0 ? 64 : 0;  // a small table is enough to build the optimizer
    models::Session session(ref, o);
    optim::Optimizer& opt = session.optimizer();
    std::string name = opt.name();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    EXPECT_EQ(name, r.optimizer);
    EXPECT_DOUBLE_EQ(opt.lr(), r.lr);
    EXPECT_DOUBLE_EQ(opt.decay(), r.decay);
  }
  EXPECT_GE(compile_configs, 3);  // mnist_cnn, imdb_bilstm and char_lstm carry one
}
