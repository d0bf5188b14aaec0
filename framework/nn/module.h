// Module: a node of the model tree holding named parameters and child modules.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/arena.h"

namespace loupe::nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  virtual std::string type_name() const = 0;
  // Runs forward inside an NVTX range named by the module's path, e.g. "fc2/Linear".
  Tensor operator()(const Tensor& x);

  // Parameters of this module and its children, by path ("fc1.weight"), in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // State that is not trained but belongs to the model (batch-norm running statistics): moved by
  // to() and saved in checkpoints, outside the parameter arena.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t num_parameters() const;

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
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const;
  void summarise(const std::string& prefix, int depth, std::string& out) const;
  void assign_paths(const std::string& path);
  std::string range_name_;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::unique_ptr<ParameterArena> arena_;
  bool training_ = true;
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;
};

// Mixed precision (--precision fp16/bf16): a float32 tensor on the GPU in compute_dtype(); anything
// else as it is. A parameter whose arena has a compute copy (the trainer enables it) is its view
// into that copy; any other tensor goes through the differentiable cast, whose backward casts the
// gradient back to float32. Either way the float32 master weights receive float32 gradients.
Tensor autocast(const Tensor& t);

}  // namespace loupe::nn
