// The six reference models of the 2017 Keras benchmarks (docs/reference-models.md): each one's
// layers come from its Keras file, models/keras/NAME.json, built into the library, so that the
// file loupe ships and the model it trains are one definition; here are their recipes, their data
// sets and the parameter counts the files must give (KerasJson.TheReferenceModelsAsFilesAreTheModels).
// The layers in the files carry the names these models' tensors have always had in checkpoints
// (fc1, conv1, lstm, embedding, ...).
#include "core/error.h"
#include "models/keras_json.h"
#include "models/reference_files.h"
#include "models/registry.h"

namespace loupe::models {

namespace {
ModelInfo reference(const std::string& name, const std::string& description, Recipe recipe) {
  const char* text = reference_model_file(name);
  LOUPE_CHECK(text, "the reference model '", name, "' has no file built in (models/keras/", name, ".json)");
  ModelInfo m;
  m.name = name;
  m.description = description;
  m.recipe = std::move(recipe);
  ModelInfo file = keras_model(text, name, /*data_sized=*/true);
  m.build_for = std::move(file.build_for);
  m.costs = std::move(file.costs);  // the memory check before the build (models/memory.h)
  return m;
}

Recipe recipe(const std::string& optimizer, double lr, int64_t batch, int epochs, const std::string& dataset) {
  Recipe r = with_optimizer(Recipe{}, optimizer);  // Keras's defaults: rho .9 (.95 Adadelta), eps 1e-7
  r.lr = lr;
  r.batch = batch;
  r.epochs = epochs;
  r.dataset = dataset;
  return r;
}
}  // namespace

// Dense 512 ReLU, Dropout .2, Dense 512 ReLU, Dropout .2, Dense 10 softmax; RMSprop.
ModelInfo mnist_mlp() {
  ModelInfo m = reference("mnist_mlp", "MLP 784-512-512-10 with dropout (Keras mnist_mlp.py)",
                          recipe("rmsprop", 1e-3, 128, 20, "mnist"));
  m.expected_parameters = 669706;
  return m;
}

// Conv 32 3x3 ReLU, Conv 64 3x3 ReLU, MaxPool 2, Dropout .25, Dense 128 ReLU, Dropout .5, Dense 10.
ModelInfo mnist_cnn() {
  ModelInfo m = reference("mnist_cnn", "CNN conv32-conv64-maxpool-dense128 with dropout (Keras mnist_cnn.py)",
                          recipe("adadelta", 1.0, 128, 12, "mnist"));
  m.expected_parameters = 1199882;
  return m;
}

// 2x (Conv 3x3 same, Conv 3x3 valid, MaxPool 2, Dropout .25) at 32 and 64 filters, Dense 512 ReLU,
// Dropout .5, Dense 10; RMSprop lr 1e-4 with Keras's decay 1e-6 a step; shifts and flips.
ModelInfo cifar10_cnn() {
  ModelInfo m = reference("cifar10_cnn", "CNN 2x(conv-conv-maxpool) + dense 512 with dropout (Keras cifar10_cnn.py)",
                          recipe("rmsprop", 1e-4, 32, 20, "cifar10"));
  m.recipe.decay = 1e-6;
  m.recipe.augment = true;
  m.expected_parameters = 1250858;
  return m;
}

// Embedding 20000x128, Bidirectional LSTM 64 (both directions' last states), Dropout .5, Dense 1
// sigmoid (fused into the binary cross-entropy); reviews of 100 tokens.
ModelInfo imdb_bilstm() {
  ModelInfo m = reference("imdb_bilstm", "Embedding 20000x128 -> bidirectional LSTM 64 -> dropout -> dense 1 (Keras imdb_bidirectional_lstm.py)",
                          recipe("adam", 1e-3, 32, 4, "imdb"));
  m.recipe.loss = train::Loss::BinaryCrossEntropyWithLogits;
  m.vocab = 20000;
  m.expected_parameters = 2659457;  // Keras counts 2,658,945: its LSTM has one bias per gate, cuDNN's two
  return m;
}

// Embedding Vx50, the mean over 400 positions (padding included), Dense 1 sigmoid. V (the largest
// id + 1: the 20,000 most frequent words, then every training bigram) comes from the data: about
// 1.2 million on IMDb.
ModelInfo imdb_fasttext() {
  ModelInfo m = reference("imdb_fasttext", "fastText: embedding Vx50 of words and bigrams -> mean over time -> dense 1 (Keras imdb_fasttext.py)",
                          recipe("adam", 1e-3, 32, 5, "imdb_bigrams"));
  m.recipe.loss = train::Loss::BinaryCrossEntropyWithLogits;
  m.vocab = 1200000;
  m.expected_parameters = 1200000 * 50 + 51;
  return m;
}

// One-hot windows of 40 characters, LSTM 128 (its state after the last character), Dense C
// softmax. C, the text's distinct characters, comes from the corpus (57 in the Nietzsche text).
// `loupe generate char_lstm` samples from a trained model.
ModelInfo char_lstm() {
  ModelInfo m = reference("char_lstm", "LSTM 128 over one-hot characters -> dense softmax (Keras lstm_text_generation.py)",
                          recipe("rmsprop", 1e-2, 128, 10, "chars"));
  m.vocab = 57;
  m.expected_parameters = 4 * 128 * (57 + 128) + 8 * 128 + 128 * 57 + 57;  // cuDNN's two LSTM biases
  return m;
}

}  // namespace loupe::models
