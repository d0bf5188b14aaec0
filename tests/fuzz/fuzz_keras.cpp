// The Keras model file reader (models/keras_json.cpp): any bytes as a model file. A refusal is a
// loupe::Error; an accepted model must count its parameters consistently, and one small enough to
// build cheaply (200,000 parameters: an LSTM's initialisation is cubic in its units, and one of 535
// units took 15 s under the sanitizers) is built and must have the parameters it announced.
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "models/keras_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe;
  try {
    const models::ModelInfo m = models::keras_model(std::string(reinterpret_cast<const char*>(data), size), "input");
    if (m.expected_parameters <= 0 || m.keras_parameters <= 0) __builtin_trap();
    if (m.expected_parameters <= 200000 && m.build()->num_parameters() != m.expected_parameters) __builtin_trap();
    fuzz::accepted("a model");
  } catch (const Error& e) {
    fuzz::rejected(e);
  }
  return 0;
}
