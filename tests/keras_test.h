// What the two Keras test files share: a model file's refusal, and a uniform random tensor.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "nn/layers.h"

namespace loupe::test {

// The error the file `j` is refused with ("" when it is read).
inline std::string keras_refusal(const nlohmann::json& j) {
  try {
    models::keras_model(j.dump(), "m.json");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// Uniform in [0, 1), from the library's generator (manual_seed makes it repeatable).
inline Tensor uniform01(const Shape& s) {
  Tensor t = empty(s);
  nn::uniform_(t, 0, 1);
  return t;
}

}  // namespace loupe::test
