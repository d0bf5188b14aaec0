// The reference models' former C++ definitions, the witness their Keras files are checked against.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/module.h"

namespace loupe::witness {

// The model `name` as defined in C++ before models/keras/NAME.json became its definition; `vocab`
// as ModelInfo::build_for takes it. Weights from the default generator.
std::shared_ptr<nn::Module> defined_reference_model(const std::string& name, int64_t vocab);

}  // namespace loupe::witness
