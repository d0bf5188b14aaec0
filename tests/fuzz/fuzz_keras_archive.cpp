// Keras 3's .keras files (models/keras_json.cpp's load_keras_model: config.json through libzip
// with the .npz reader's checks; model.weights.h5 inflated and read by libhdf5 as a file image in
// a child process, data/isolated.h): any bytes as a .keras file, read as a model and then into it
// its own weights. A model too large to build cheaply (fuzz_keras's bound) is read but not built.
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "models/keras_json.h"
#include "models/keras_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe;
  static fuzz::TempFile file(".keras");
  const std::string& path = file.write(data, size);
  try {
    const models::ModelInfo info = models::load_keras_model(path);
    if (info.expected_parameters > 200000) {
      fuzz::accepted("a model too large to build here");
      return 0;
    }
    auto model = info.build();
    models::load_keras_weights_file(*model, info, info.own_weights);
    fuzz::accepted("the model and its weights");
  } catch (const Error& e) {
    fuzz::rejected(e);
  }
  return 0;
}
