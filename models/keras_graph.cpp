#include "models/keras_graph.h"

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/file_check.h"

namespace loupe::models::keras {

bool is_functional(const json& root) {
  if (!root.is_object() || !root.contains("class_name") || !root.at("class_name").is_string()) return false;
  const std::string& c = root.at("class_name").get_ref<const std::string&>();
  return c == "Model" || c == "Functional";
}

namespace {
// A tensor a call reads: a layer's name and which of its outputs.
struct Read {
  std::string layer;
  int output;
};
// A layer of the file with the tensors its call reads, in the file's order.
struct Entry {
  Layer layer;
  std::vector<Read> reads;
};

class GraphReader {
 public:
  explicit GraphReader(std::string file) : file_(std::move(file)) {}

  std::vector<Layer> read(const json& root) {
    const json& cfg = root.at("config");
    if (!cfg.is_object() || !cfg.contains("layers") || !cfg.at("layers").is_array() || cfg.at("layers").empty())
      refuse_file(file_, "its functional model has no layers");
    const json& list = cfg.at("layers");
    if (list.size() > kMaxLayers)
      refuse_file(file_, std::to_string(list.size()) + " layers; loupe reads at most " + std::to_string(kMaxLayers) +
                            " (a Keras model has tens to hundreds)");
    for (const json& l : list) entry(l);
    input_ = endpoint(cfg, "input_layers", "input");
    output_ = endpoint(cfg, "output_layers", "output");
    if (entries_[input_].layer.cls != "InputLayer")
      refuse_file(file_, "the model's input is " + layer_label(entries_[input_].layer) + ", not an InputLayer");
    return sorted();
  }

 private:
  [[noreturn]] void fail(const Layer& l, const std::string& why) const { refuse_file(file_, layer_label(l) + " " + why); }

  void entry(const json& l) {
    if (!l.is_object() || !l.contains("class_name") || !l.contains("config") || !l.at("config").is_object())
      refuse_file(file_, "a layer without class_name and config");
    if (!l.at("class_name").is_string())
      refuse_file(file_, "a layer's class_name is " + shown(l.at("class_name")) + "; a Keras layer's is its class's name");
    const json& cfg = l.at("config");
    const json& name = l.contains("name") ? l.at("name") : cfg.contains("name") ? cfg.at("name") : json();
    if (!name.is_string()) refuse_file(file_, "a layer's name is " + shown(name) + "; a functional model names every layer");
    Entry e{{l.at("class_name").get<std::string>(), name.get<std::string>(), &cfg, {}}, {}};
    if (!index_.emplace(e.layer.name, entries_.size()).second)
      refuse_file(file_, "two layers are named '" + cut(e.layer.name) + "'; a functional model's calls name layers");
    e.reads = calls(e.layer, l.contains("inbound_nodes") ? l.at("inbound_nodes") : json::array());
    entries_.push_back(std::move(e));
  }

  // The tensors the layer's one call reads.
  std::vector<Read> calls(const Layer& l, const json& nodes) {
    if (!nodes.is_array()) fail(l, "has inbound_nodes " + shown(nodes) + "; Keras writes a list of calls");
    if (nodes.empty()) {
      if (l.cls != "InputLayer") fail(l, "is not called on any tensor (its inbound_nodes are empty)");
      return {};
    }
    if (l.cls == "InputLayer") fail(l, "is called on a tensor; an InputLayer is where the data comes in");
    // A bare [layer, node, tensor] (the layout of tf.keras's SavedModel metadata) is one call.
    if (nodes.size() > 1 && !(nodes[0].is_string()))
      fail(l, "is called " + std::to_string(nodes.size()) + " times (a shared layer); loupe builds a layer for one call");
    std::vector<Read> reads;
    if (nodes[0].is_string()) tensor(l, nodes, reads);
    else if (nodes[0].is_object()) keras3_call(l, nodes[0], reads);
    else if (nodes[0].is_array()) for (const json& t : nodes[0]) tensor(l, t, reads);
    else fail(l, "has a call " + shown(nodes[0]) + " that is not one of Keras's layouts");
    if (reads.empty()) fail(l, "is called on no tensor");
    return reads;
  }

  // Keras 3: {"args": [tensor or [tensors...]], "kwargs": {}}; a recurrent layer's kwargs may hold
  // its initial_state, tensors read after the sequence.
  void keras3_call(const Layer& l, const json& call, std::vector<Read>& reads) {
    for (auto it = call.begin(); it != call.end(); ++it)
      if (it.key() != "args" && it.key() != "kwargs") fail(l, "has a call with a key '" + cut(it.key()) + "' that Keras's have not");
    json kwargs = call.contains("kwargs") ? call.at("kwargs") : json();
    json initial;
    if (is_recurrent(l.cls) && kwargs.is_object() && kwargs.contains("initial_state")) {
      initial = kwargs.at("initial_state");
      kwargs.erase("initial_state");
    }
    keyword_free(l, kwargs);
    if (!call.contains("args") || !call.at("args").is_array()) fail(l, "has a call without args");
    for (const json& a : call.at("args")) {
      if (a.is_array()) {
        for (const json& t : a) keras_tensor(l, t, reads);
      } else {
        keras_tensor(l, a, reads);
      }
    }
    if (initial.is_null()) return;
    if (!initial.is_array()) fail(l, "has initial_state " + shown(initial) + "; Keras writes a list of tensors");
    for (const json& t : initial) keras_tensor(l, t, reads);
  }

  void keras_tensor(const Layer& l, const json& t, std::vector<Read>& reads) {
    const bool ok = t.is_object() && t.value("class_name", json()) == "__keras_tensor__" && t.contains("config") &&
                    t.at("config").is_object() && t.at("config").contains("keras_history");
    if (!ok) fail(l, "is called on " + shown(t) + ", which is not a Keras tensor of the model");
    const json& h = t.at("config").at("keras_history");
    if (!h.is_array() || h.size() != 3) fail(l, "reads a tensor whose keras_history " + shown(h) + " is not [layer, node, tensor]");
    tensor(l, json::array({h[0], h[1], h[2], json::object()}), reads);
  }

  // Keras 2: [layer, node, tensor] or [layer, node, tensor, kwargs]. A recurrent layer's initial
  // states are its call's tensors after the sequence (Keras 2's and tf.keras's RNN.__call__).
  void tensor(const Layer& l, const json& t, std::vector<Read>& reads) {
    if (!t.is_array() || t.size() < 3 || t.size() > 4 || !t[0].is_string())
      fail(l, "reads " + shown(t) + ", which is not [layer, node, tensor]");
    if (t.size() == 4) keyword_free(l, t[3]);
    if (t[1] != 0) fail(l, "reads call " + shown(t[1]) + " of layer '" + cut(t[0].get<std::string>()) +
                           "' (a shared layer); loupe builds a layer for one call");
    // A layer's outputs are few: a recurrent layer's output and its states.
    if (!t[2].is_number_integer() || t[2].get<int64_t>() < 0 || t[2].get<int64_t>() > 4)
      fail(l, "reads output " + shown(t[2]) + " of layer '" + cut(t[0].get<std::string>()) +
                  "'; a Keras layer's outputs are numbered from 0, a recurrent layer's states after its output");
    reads.push_back({t[0].get<std::string>(), int(t[2].get<int64_t>())});
  }

  void keyword_free(const Layer& l, const json& kwargs) {
    if (kwargs.is_null() || (kwargs.is_object() && kwargs.empty())) return;
    if (!kwargs.is_object()) fail(l, "has a call's keyword arguments " + shown(kwargs) + "; Keras writes an object");
    fail(l, "is called with the keyword argument '" + cut(kwargs.begin().key()) + "'; loupe calls a layer on its inputs alone");
  }

  // The one layer of input_layers or output_layers: [name, node, tensor] or a list of one of them.
  size_t endpoint(const json& cfg, const char* key, const std::string& what) {
    if (!cfg.contains(key)) refuse_file(file_, "its functional model has no " + std::string(key));
    const json& v = cfg.at(key);
    const bool leaf = v.is_array() && v.size() == 3 && v[0].is_string();
    const json& one = leaf ? v : v.is_array() && v.size() == 1 ? v[0] : v;
    if (v.is_array() && v.size() > 1 && !leaf)
      refuse_file(file_, "the model has " + std::to_string(v.size()) + " " + what + "s; loupe trains a model of one " +
                            what);
    if (!one.is_array() || one.size() != 3 || !one[0].is_string() || one[1] != 0 || one[2] != 0)
      refuse_file(file_, std::string(key) + " is " + shown(v) + "; loupe takes one [layer, 0, 0]");
    const auto it = index_.find(one[0].get<std::string>());
    if (it == index_.end())
      refuse_file(file_, "the model's " + what + " is '" + cut(one[0].get<std::string>()) + "', which is not a layer of it");
    return it->second;
  }

  // Kahn's order, the earliest ready layer in the file first: a file Keras wrote lists its layers
  // in an order that is one already, and keeps it (Keras 3 numbers its weights' groups in it).
  std::vector<Layer> sorted() {
    const size_t n = entries_.size();
    std::vector<std::vector<size_t>> readers(n);
    std::vector<size_t> waiting(n, 0);
    std::vector<std::vector<size_t>> reads(n);
    std::vector<std::vector<int>> outputs(n);
    for (size_t i = 0; i < n; ++i)
      for (const Read& r : entries_[i].reads) {
        const auto it = index_.find(r.layer);
        if (it == index_.end()) fail(entries_[i].layer, "reads '" + cut(r.layer) + "', which is not a layer of the model");
        outputs[i].push_back(r.output);
        reads[i].push_back(it->second);
        readers[it->second].push_back(i);
        ++waiting[i];
      }
    std::vector<size_t> order, position(n, SIZE_MAX);
    std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
    for (size_t i = 0; i < n; ++i)
      if (!waiting[i]) ready.push(i);
    while (!ready.empty()) {
      const size_t i = ready.top();
      ready.pop();
      position[i] = order.size();
      order.push_back(i);
      for (size_t r : readers[i])
        if (--waiting[r] == 0) ready.push(r);
    }
    if (order.size() < n) {
      // Each layer left waits on another left: walking back n reads from one of them ends on a cycle.
      size_t i = 0;
      while (position[i] != SIZE_MAX) ++i;
      for (size_t step = 0; step < n; ++step)
        for (size_t r : reads[i])
          if (position[r] == SIZE_MAX) {
            i = r;
            break;
          }
      fail(entries_[i].layer, "is on a cycle of calls; a Keras model's layers form no cycle");
    }
    leads_to_output(reads);
    std::vector<Layer> out;
    for (size_t i : order) {
      Layer l = entries_[i].layer;
      for (size_t r : reads[i]) l.inbound.push_back(int(position[r]));
      l.inbound_outputs = outputs[i];
      out.push_back(std::move(l));
    }
    return out;
  }

  // Every layer leads to the output, and the only layer that reads nothing is the input.
  void leads_to_output(const std::vector<std::vector<size_t>>& reads) const {
    std::vector<bool> seen(entries_.size(), false);
    std::vector<size_t> todo{output_};
    seen[output_] = true;
    while (!todo.empty()) {
      const size_t i = todo.back();
      todo.pop_back();
      for (size_t r : reads[i])
        if (!seen[r]) seen[r] = true, todo.push_back(r);
    }
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!seen[i]) fail(entries_[i].layer, "does not lead to the model's output");
      if (reads[i].empty() && i != input_)
        fail(entries_[i].layer, "is a second input; loupe trains a model of one input");
    }
  }

  std::string file_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  size_t input_ = 0, output_ = 0;
};
}  // namespace

std::vector<Layer> graph_layers(const json& root, const std::string& file) { return GraphReader(file).read(root); }

// Keras's merge layers as nn::Merge's operations.
int concat_axis(const Layer& l, size_t rank, const std::string& file) {
  const json& c = *l.cfg;
  const json& v = c.contains("axis") && !c.at("axis").is_null() ? c.at("axis") : json(-1);
  const int64_t r = int64_t(rank);
  if (!v.is_number_integer() || v.get<int64_t>() == 0 || v.get<int64_t>() < -r || v.get<int64_t>() > r)
    refuse_file(file, layer_label(l) + " has axis " + shown(v) + "; loupe concatenates along a sample's dimension, 1 to " +
                          std::to_string(r) + " or -1 to -" + std::to_string(r));
  const int64_t a = v.get<int64_t>();
  return int(a < 0 ? r + a : a - 1);
}

std::optional<nn::MergeOp> merge_op(const std::string& c) {
  using M = nn::MergeOp;
  static const std::pair<const char*, M> ops[] = {{"Add", M::Add},         {"Subtract", M::Subtract},
                                                  {"Multiply", M::Multiply}, {"Average", M::Average},
                                                  {"Maximum", M::Maximum},   {"Minimum", M::Minimum},
                                                  {"Concatenate", M::Concatenate}};
  for (const auto& [name, op] : ops)
    if (c == name) return op;
  return std::nullopt;
}

}  // namespace loupe::models::keras
