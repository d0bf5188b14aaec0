// A Keras functional model's graph (docs/keras.md, "Functional models"): the config's layers with
// the calls that connect them, in the three layouts Keras writes. Internal to models/.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/keras_layers.h"
#include "nn/graph.h"

namespace loupe::models::keras {

// Whether `root` is a functional model: class_name "Model" (Keras 2) or "Functional" (tf.keras,
// Keras 3).
bool is_functional(const json& root);

// The functional model's layers, each after the layers it reads (Layer::inbound: their indices in
// the list), the model's input first and its output last. Each layer's one call is read from
// `inbound_nodes` in Keras 2's and tf.keras's layout (a list of [layer, node, tensor, kwargs]),
// Keras 3's ({"args": [...], "kwargs": {...}} holding "__keras_tensor__" objects whose
// keras_history is [layer, node, tensor]) or a bare [layer, node, tensor]; which output of each
// (Layer::inbound_outputs), and a recurrent layer's initial states after its sequence (Keras 3's
// kwargs' initial_state). Refused in one sentence naming the layer: a read of a layer that is not
// there, a cycle, a layer called twice (shared weights), a layer that does not lead to the output,
// several inputs or outputs, other keyword arguments of a call, more than kMaxLayers layers.
std::vector<Layer> graph_layers(const json& root, const std::string& file);

// Keras's merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate) as
// nn::Merge's operations; nullopt for another class.
std::optional<nn::MergeOp> merge_op(const std::string& cls);
// Concatenate layer `l`'s axis over a sample of `rank` dimensions as loupe's index (the batch's left
// out): Keras's -1 (the default) is the last; 0, the batch, is refused naming `file` and the layer.
int concat_axis(const Layer& l, size_t rank, const std::string& file);

}  // namespace loupe::models::keras
