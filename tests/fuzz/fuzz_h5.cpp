// Keras's weight files (data/h5_hdf5.cpp, libhdf5; models/keras_weights.cpp's layouts): any bytes
// as a weights file, read into two models that tests/keras_reference.py also writes: its mlp
// (Dense, Dense) and its bidirectional one (two Bidirectional LSTMs, a Dense), whose Keras 3
// variables are nested groups.
#include "core/error.h"
#include "fuzz_util.h"
#include "models/keras_json.h"
#include "models/keras_weights.h"

namespace {
const char* const kMlp = R"({"class_name": "Sequential", "config": {"name": "sequential_1", "layers": [
  {"class_name": "Dense", "config": {"name": "fc1", "units": 5, "activation": "relu", "batch_input_shape": [null, 7]}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]},
  "keras_version": "2.2.4", "backend": "tensorflow"})";
const char* const kBidirectional = R"({"class_name": "Sequential", "config": {"name": "sequential_1", "layers": [
  {"class_name": "Bidirectional", "config": {"name": "bi1", "merge_mode": "concat", "layer": {"class_name": "LSTM",
   "config": {"name": "lstm_1", "units": 4, "return_sequences": true}}, "batch_input_shape": [null, 5, 3]}},
  {"class_name": "Bidirectional", "config": {"name": "bi2", "merge_mode": "concat", "layer": {"class_name": "LSTM",
   "config": {"name": "lstm_2", "units": 2, "return_sequences": false}}}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}]},
  "keras_version": "2.2.4", "backend": "tensorflow"})";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe;
  static const models::ModelInfo mlp = models::keras_model(kMlp, "mlp.json");
  static const models::ModelInfo bidirectional = models::keras_model(kBidirectional, "bidirectional.json");
  static fuzz::TempFile file(".h5");
  const std::string path = file.write(data, size);
  for (const models::ModelInfo* info : {&mlp, &bidirectional}) {
    try {
      auto model = info->build();
      models::load_keras_weights_file(*model, *info, path);
      fuzz::accepted("the model's weights");
    } catch (const Error& e) {
      fuzz::rejected(e);
    }
  }
  return 0;
}
