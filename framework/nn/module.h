// Module: a node of the model tree holding named parameters and child modules.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/arena.h"
#include "ops/activation.h"

namespace loupe::nn {

// What a layer can fold into its own pass over memory: an activation, then dropout (ops/bias_act.h).
// nn::Sequential builds one from the layers that follow a layer and hands it over when the layer
// accepts it: Linear + ReLU + Dropout run as one GEMM and one fused kernel each way.
struct Epilogue {
  std::optional<Act> act;
  bool has_dropout = false;
  double dropout = 0;      // its probability (0 in eval mode)
  int absorbed = 0;        // how many following layers it stands for
  std::string range_name;  // their NVTX ranges' names, "+fc1_relu/ReLU+drop1/Dropout"
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  virtual std::string type_name() const = 0;
  // Runs forward inside an NVTX range named by the module's path, e.g. "fc2/Linear".
  Tensor operator()(const Tensor& x);

  // Epilogue fusion (see Epilogue). A layer that can apply an epilogue in its own pass says which
  // it accepts and runs them; a layer that is an epilogue step (an activation, a dropout) adds
  // itself to one, or refuses (returns false) where it cannot follow what is already there.
  virtual bool accepts(const Epilogue&) const { return false; }
  virtual Tensor forward_fused(const Tensor& x, const Epilogue& e);
  virtual bool extend(Epilogue&) const { return false; }
  // forward_fused inside one NVTX range named for the layer and the ones it absorbed.
  Tensor call_fused(const Tensor& x, const Epilogue& e);

  // A node of an nn::Graph that reads more than one input (a merge; a recurrent layer and its
  // mask): whether it takes `n` inputs, and its output from them. One input is forward's.
  virtual bool takes(size_t n) const { return n == 1; }
  virtual Tensor forward_many(const std::vector<Tensor>& xs);
  // forward_many inside the module's NVTX range.
  Tensor call_many(const std::vector<Tensor>& xs);
  // A node of an nn::Graph with several outputs (a recurrent layer's final states besides its
  // output, Keras's return_state): how many, and all of them, the first forward_many's.
  virtual int outputs() const { return 1; }
  virtual std::vector<Tensor> forward_outputs(const std::vector<Tensor>& xs) { return {forward_many(xs)}; }
  // forward_outputs inside the module's NVTX range.
  std::vector<Tensor> call_outputs(const std::vector<Tensor>& xs);
  // How the module's first op remakes a float32 input before reading it (mixed precision's cast,
  // a channels-last copy): a feed that makes the input (the trainer's gather from resident data)
  // makes it so at once, and the module's own cast and copy have nothing to do. As it comes:
  // float32, contiguous.
  struct InputLayout {
    DType dtype = DType::f32;
    MemoryFormat format = MemoryFormat::Contiguous;
  };
  virtual InputLayout input_layout() const { return {}; }

  // Parameters of this module and its children, by path ("fc1.weight"), in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // State that is not trained but belongs to the model (batch-norm running statistics): moved by
  // to() and saved in checkpoints, outside the parameter arena.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Trained parameters: every parameter's elements but those a module holds fixed (fixed_elements).
  int64_t num_parameters() const;
  // Elements of this module's own parameters that training never moves (Keras's LSTM has no
  // second bias: nn::LSTM holds it at zero), so that the count is the model's, as Keras gives it.
  virtual int64_t fixed_elements() const { return 0; }

  // Keras's l2 regularizer on the parameter `param` of this module: l2 * sum(param^2) joins the
  // loss (the trainer adds penalty() to each step's and each evaluation's loss, as Keras reports
  // them), so its gradient 2 * l2 * param flows with the loss's, scaled with it in fp16.
  void regularize(const std::string& param, double l2);
  // The sum of those terms over this module and its children; undefined where none is set.
  Tensor penalty() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // The memory format convolutions run in, here and in every child: ChannelsLast makes each
  // Conv2d convert its input to NHWC (a no-op when it already is), so that cuDNN's tensor-core
  // kernels read it without transposes; the activations that follow keep the format.
  // Parameters stay NCHW in the arena.
  void set_memory_format(MemoryFormat f);
  MemoryFormat memory_format() const { return memory_format_; }

  // Moves every parameter to `d`, packed into one contiguous arena with a matching gradient arena
  // (one optimizer launch per step, one memset to zero the gradients).
  void to(Device d);
  Device device() const;
  // The arena of a module that was moved with to(); created on the CPU on first use otherwise.
  ParameterArena& arena();

  // Parameters that this module and its children read in float32 even in mixed precision (an
  // embedding table, batch norm's scale and shift): they need no 16-bit compute copy.
  std::vector<Tensor> float32_parameters() const;

  // A one-line-per-layer summary with parameter counts.
  std::string summary() const;
  // The NVTX range name: "<path>/<Type>"; paths are assigned by to() on the root.
  const std::string& range_name() const { return range_name_; }

 protected:
  virtual std::vector<Tensor> own_float32_parameters() const { return {}; }
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 public:
  // The modules registered under this one, by name, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const;
  void summarise(const std::string& prefix, int depth, std::string& out) const;
  void assign_paths(const std::string& path);
  std::string range_name_;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, double>> l2_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::unique_ptr<ParameterArena> arena_;
  bool training_ = true;
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;
};

// One step of epilogue fusion: folds `next` (an activation, a dropout) into `e`, the epilogue of
// `layer`, where `next` extends it and `layer` accepts the result; false, `e` unchanged, otherwise.
// nn::Sequential and nn::Graph fuse with it.
bool fold_epilogue(const Module& layer, const Module& next, Epilogue& e);

// Mixed precision (--precision fp16/bf16): a float32 tensor on the GPU in compute_dtype(); anything
// else as it is. A parameter whose arena has a compute copy (the trainer enables it) is its view
// into that copy; any other tensor goes through the differentiable cast, whose backward casts the
// gradient back to float32. Either way the float32 master weights receive float32 gradients.
Tensor autocast(const Tensor& t);
// How many 16-bit tensors autocast has handed out on this thread: a step during which it did not
// grow computed nothing in 16 bits (the trainer then drops fp16's loss scaling).
int64_t autocasts_16bit();

}  // namespace loupe::nn
