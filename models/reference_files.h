// The reference models' Keras files (models/keras/NAME.json), built into the library: the one
// definition of each reference model's layers (models/reference_models.cpp builds them).
#pragma once
#include <string>

namespace loupe::models {

// The text of models/keras/`name`.json as built in, or nullptr for another name.
const char* reference_model_file(const std::string& name);

}  // namespace loupe::models
