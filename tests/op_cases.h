// One table of ops (after ggml's test-backend-ops): every op is checked by gradcheck in float64 on
// the CPU (test_ops_grad.cpp) and by CPU-vs-CUDA parity on random inputs (test_ops_cuda.cpp).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "loupe.h"
#include "ops/bias_act.h"
#include "ops/lstm.h"

namespace loupe::test {

enum class Kind { Float, Positive, Labels, Targets01 };

struct InputSpec {
  Shape shape;
  Kind kind = Kind::Float;
  int classes = 0;  // Labels: values in [0, classes)
};

struct OpCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  // CPU-vs-CUDA tolerance as a multiple of the default: cuDNN's persistent LSTM kernel is accurate
  // to ~1e-5 relative in float32 (test_ops_cuda's CudaLstm measures it against float64).
  double tol_scale = 1;
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// Random inputs, never zero: floats in +-[0.1, 1.1], positives in [0.5, 1.5].
inline std::vector<Tensor> make_inputs(const OpCase& c, DType dt, uint64_t seed) {
  std::vector<Tensor> xs;
  uint64_t off = 0;
  for (const InputSpec& s : c.inputs) {
    int64_t n = s.shape.numel();
    if (s.kind == Kind::Labels) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t(philox(seed, off + uint64_t(i), 7).v[0] % uint32_t(s.classes));
      xs.push_back(from_vector(v, s.shape));
    } else {
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        double u = philox_uniform(seed, off, uint64_t(i));
        double sign = philox(seed, off + uint64_t(i), 9).v[1] & 1 ? 1.0 : -1.0;
        v[size_t(i)] = s.kind == Kind::Float ? sign * (0.1 + u) : s.kind == Kind::Positive ? 0.5 + u : u;
      }
      Tensor t = to(from_vector(v, s.shape), dt);
      if (s.kind != Kind::Targets01) t.requires_grad_(true);
      xs.push_back(t);
    }
    off += uint64_t(n);
  }
  return xs;
}

inline std::vector<OpCase> op_cases() {
  using V = const std::vector<Tensor>&;
  std::vector<OpCase> c;
  c.push_back({"add_same", {{{3, 5}}, {{3, 5}}}, [](V x) { return x[0] + x[1]; }});
  c.push_back({"add_broadcast_row", {{{4, 6}}, {{6}}}, [](V x) { return x[0] + x[1]; }});
  c.push_back({"sub_broadcast_col", {{{4, 6}}, {{4, 1}}}, [](V x) { return x[0] - x[1]; }});
  c.push_back({"mul_broadcast_3d", {{{2, 3, 4}}, {{3, 1}}}, [](V x) { return x[0] * x[1]; }});
  c.push_back({"div", {{{3, 7}}, {{3, 7}, Kind::Positive}}, [](V x) { return x[0] / x[1]; }});
  c.push_back({"div_broadcast", {{{5}, Kind::Float}, {{2, 5}, Kind::Positive}}, [](V x) { return x[0] / x[1]; }});
  c.push_back({"scalar_affine", {{{4, 3}}}, [](V x) { return x[0] * 2.5 + 1.0; }});
  c.push_back({"bias_add_2d", {{{5, 7}}, {{7}}}, [](V x) { return bias_add(x[0], x[1]); }});
  c.push_back({"bias_add_4d", {{{2, 3, 2, 2}}, {{3}}}, [](V x) { return bias_add(x[0], x[1]); }});
  c.push_back({"bias_add_rows_vec4", {{{6, 8}}, {{8}}}, [](V x) { return bias_add(x[0], x[1]); }});
  c.push_back({"bias_add_4d_vec4", {{{2, 3, 2, 4}}, {{3}}}, [](V x) { return bias_add(x[0], x[1]); }});
  c.push_back({"relu", {{{6, 9}}}, [](V x) { return relu(x[0]); }});
  c.push_back({"relu_vec4", {{{4, 8}}}, [](V x) { return relu(x[0]); }});
  c.push_back({"sigmoid_vec4", {{{2, 6}}}, [](V x) { return sigmoid(x[0]); }});
  c.push_back({"sigmoid", {{{6, 9}}}, [](V x) { return sigmoid(x[0]); }});
  c.push_back({"tanh", {{{6, 9}}}, [](V x) { return tanh(x[0]); }});
  c.push_back({"dropout", {{{8, 33}}}, [](V x) { manual_seed(42); return dropout(x[0], 0.3, true); }});
  c.push_back({"sum_all", {{{4, 5}}}, [](V x) { return sum(x[0]); }});
  c.push_back({"mean_all", {{{4, 5}}}, [](V x) { return mean(x[0]); }});
  c.push_back({"sum_dim0", {{{4, 5}}}, [](V x) { return sum(x[0], 0); }});
  c.push_back({"sum_dim1_keep", {{{3, 4, 5}}}, [](V x) { return sum(x[0], 1, true); }});
  c.push_back({"sum_except_dim1", {{{3, 4, 5}}}, [](V x) { return sum_except(x[0], 1); }});
  c.push_back({"sum_except_dim0", {{{4, 5}}}, [](V x) { return sum_except(x[0], 0); }});
  c.push_back({"mean_dim_last", {{{3, 4, 5}}}, [](V x) { return mean(x[0], -1); }});
  c.push_back({"softmax", {{{5, 7}}}, [](V x) { return softmax(x[0]); }});
  c.push_back({"log_softmax", {{{5, 7}}}, [](V x) { return log_softmax(x[0]); }});
  c.push_back({"cross_entropy", {{{6, 10}}, {{6}, Kind::Labels, 10}},
               [](V x) { return cross_entropy(x[0], x[1]); }});
  c.push_back({"bce_with_logits", {{{9}}, {{9}, Kind::Targets01}},
               [](V x) { return binary_cross_entropy_with_logits(x[0], x[1]); }});
  c.push_back({"matmul", {{{5, 7}}, {{7, 3}}}, [](V x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_transposed_views", {{{7, 5}}, {{3, 7}}},
               [](V x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); }});
  c.push_back({"matmul_odd", {{{1, 13}}, {{13, 1}}}, [](V x) { return matmul(x[0], x[1]); }});
  c.push_back({"linear", {{{4, 6}}, {{3, 6}}, {{3}}}, [](V x) { return linear(x[0], x[1], x[2]); }});
  c.push_back({"reshape_flatten", {{{2, 3, 4}}}, [](V x) { return flatten(x[0], 1) * flatten(x[0], 1); }});
  c.push_back({"transpose_contiguous", {{{3, 4}}}, [](V x) { return contiguous(transpose(x[0], 0, 1)) * 2.0; }});
  c.push_back({"slice", {{{5, 4}}}, [](V x) { return slice(x[0], 0, 1, 4) * slice(x[0], 0, 2, 5); }});
  // Strided copies (core/copy_plan.h): rows, and at these sizes the general kernel (test_copy
  // runs the tiled transposes at theirs); their gradients are strided copies too.
  c.push_back({"transpose_rows_contiguous", {{{3, 4, 5}}}, [](V x) { return contiguous(transpose(x[0], 0, 1)) * 2.0; }});
  c.push_back({"transpose_5d_contiguous", {{{2, 3, 2, 4, 3}}},
               [](V x) { return contiguous(transpose(transpose(x[0], 0, 3), 1, 4)) * 2.0; }});
  c.push_back({"slice_transpose_contiguous", {{{4, 7}}}, [](V x) { return contiguous(transpose(slice(x[0], 1, 1, 6), 0, 1)) * 2.0; }});
  // Embedding: int32 ids in [0, 6), more ids than rows so some repeat (their gradients add up);
  // E = 8 takes the float4 path on CUDA.
  c.push_back({"embedding_1d", {{{7}, Kind::Labels, 6}, {{6, 4}}}, [](V x) { return embedding(x[0], x[1]); }});
  c.push_back({"embedding_2d", {{{3, 5}, Kind::Labels, 6}, {{6, 4}}}, [](V x) { return embedding(x[0], x[1]); }});
  c.push_back({"embedding_2d_vec4", {{{3, 5}, Kind::Labels, 6}, {{6, 8}}},
               [](V x) { return embedding(x[0], x[1]); }});
  // fastText's pattern: the mean over positions, whose gradient reaches the embedding as a view with
  // stride 0 along them (read in place); E = 6 takes the float2 path on CUDA.
  c.push_back({"embedding_mean_dim1_vec2", {{{3, 5}, Kind::Labels, 6}, {{6, 6}}},
               [](V x) { return mean(embedding(x[0], x[1]), 1); }});
  c.push_back({"cat_dim0", {{{2, 3}}, {{4, 3}}}, [](V x) { return cat({x[0], x[1]}, 0); }});
  c.push_back({"cat_dim1_3d", {{{2, 3, 4}}, {{2, 1, 4}}}, [](V x) { return cat({x[0], x[1]}, 1); }});
  c.push_back({"cat_three_last_dim", {{{3, 2}}, {{3, 4}}, {{3, 1}}},
               [](V x) { return cat({x[0], x[1], x[2]}, -1) * cat({x[2], x[1], x[0]}, 1); }});
  auto conv = [](int sh, int sw, int ph, int pw) {
    return [=](V x) {
      Conv2dParams p;
      p.stride_h = sh; p.stride_w = sw; p.pad_h = ph; p.pad_w = pw;
      return conv2d(x[0], x[1], p);
    };
  };
  c.push_back({"conv2d_valid", {{{2, 3, 6, 5}}, {{4, 3, 3, 3}}}, conv(1, 1, 0, 0)});
  c.push_back({"conv2d_same", {{{2, 2, 5, 5}}, {{3, 2, 3, 3}}}, conv(1, 1, 1, 1)});
  c.push_back({"conv2d_stride2_odd", {{{1, 3, 7, 9}}, {{2, 3, 3, 2}}}, conv(2, 2, 1, 0)});
  c.push_back({"conv2d_explicit_pad", {{{2, 1, 4, 6}}, {{2, 1, 1, 3}}}, conv(1, 2, 2, 1)});
  c.push_back({"conv2d_bias_relu", {{{2, 2, 5, 4}}, {{3, 2, 3, 3}}, {{3}}},
               [](V x) { Conv2dParams p; p.pad_h = p.pad_w = 1; return relu(bias_add(conv2d(x[0], x[1], p), x[2])); }});
  auto pool = [](bool max, int k, int s, int pad) {
    return [=](V x) {
      Pool2dParams p;
      p.kernel_h = p.kernel_w = k; p.stride_h = p.stride_w = s; p.pad_h = p.pad_w = pad;
      return max ? max_pool2d(x[0], p) : avg_pool2d(x[0], p);
    };
  };
  c.push_back({"max_pool2d_2x2", {{{2, 3, 6, 6}}}, pool(true, 2, 2, 0)});
  c.push_back({"max_pool2d_2x2_odd_edge", {{{2, 2, 5, 7}}}, pool(true, 2, 2, 0)});
  c.push_back({"max_pool2d_2x2_s3_gaps", {{{1, 2, 8, 8}}}, pool(true, 2, 3, 1)});
  c.push_back({"max_pool2d_3x3_s2_pad1_odd", {{{1, 2, 7, 5}}}, pool(true, 3, 2, 1)});
  c.push_back({"avg_pool2d_2x2", {{{2, 2, 4, 6}}}, pool(false, 2, 2, 0)});
  c.push_back({"avg_pool2d_3x3_s1_pad1", {{{1, 2, 5, 5}}}, pool(false, 3, 1, 1)});
  c.push_back({"global_avg_pool", {{{2, 3, 4, 5}}}, [](V x) { return global_avg_pool(x[0]); }});
  // Channels-last (NHWC) inputs: the same values, another memory order, through every op that has
  // a channels-last path (conv, bias_add, activations, pooling, dropout, the channel sum).
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  c.push_back({"conv2d_channels_last", {{{2, 3, 6, 5}}, {{4, 3, 3, 3}}}, [=](V x) {
                 Conv2dParams p; p.pad_h = 1; return conv2d(contiguous(x[0], CL), x[1], p); }});
  c.push_back({"conv2d_channels_last_one_channel", {{{2, 1, 5, 5}}, {{3, 1, 3, 3}}},
               [=](V x) { return conv2d(contiguous(x[0], CL), x[1], Conv2dParams{}); }});
  c.push_back({"conv_bias_relu_pool_channels_last", {{{2, 3, 6, 6}}, {{4, 3, 3, 3}}, {{4}}}, [=](V x) {
                 Conv2dParams p; p.pad_h = p.pad_w = 1;
                 Pool2dParams q;
                 return flatten(max_pool2d(relu(bias_add(conv2d(contiguous(x[0], CL), x[1], p), x[2])), q), 1); }});
  c.push_back({"max_pool2d_channels_last_overlap", {{{2, 3, 7, 5}}}, [=](V x) {
                 Pool2dParams q; q.kernel_h = q.kernel_w = 3; q.pad_h = q.pad_w = 1;
                 return max_pool2d(contiguous(x[0], CL), q); }});
  c.push_back({"avg_pool2d_channels_last", {{{2, 3, 4, 6}}}, [=](V x) { return avg_pool2d(contiguous(x[0], CL), Pool2dParams{}); }});
  c.push_back({"sigmoid_dropout_channels_last", {{{2, 4, 3, 3}}}, [=](V x) {
                 manual_seed(42); return dropout(sigmoid(contiguous(x[0], CL)), 0.3, true); }});
  c.push_back({"bias_add_channels_last_vec4", {{{2, 4, 3, 3}}, {{4}}},
               [=](V x) { return bias_add(contiguous(x[0], CL), x[1]); }});
  c.push_back({"sum_except_channels_last", {{{3, 4, 2, 5}}}, [=](V x) { return sum_except(contiguous(x[0], CL), 1); }});
  // The fused epilogue (ops/bias_act.h): [rows, C] with C a power of two (the bias gradient
  // reduced in its backward kernel), channels-last, NCHW and odd channel counts (sum_except).
  auto ba = [](std::optional<Act> act, double p, bool cl) {
    return [=](V x) {
      manual_seed(42);
      return bias_act(cl ? contiguous(x[0], CL) : x[0], x.size() > 1 ? x[1] : Tensor(), act, p, true);
    };
  };
  c.push_back({"bias_act_relu_dropout_rows", {{{8, 16}}, {{16}}}, ba(Act::Relu, 0.3, false)});
  c.push_back({"bias_act_relu_channels_last", {{{2, 8, 3, 3}}, {{8}}}, ba(Act::Relu, 0.0, true)});
  c.push_back({"bias_act_relu_dropout_channels_last", {{{2, 4, 3, 5}}, {{4}}}, ba(Act::Relu, 0.25, true)});
  c.push_back({"bias_act_tanh_nchw", {{{2, 3, 2, 4}}, {{3}}}, ba(Act::Tanh, 0.0, false)});
  c.push_back({"bias_act_sigmoid_odd", {{{5, 7}}, {{7}}}, ba(Act::Sigmoid, 0.0, false)});
  c.push_back({"bias_act_dropout_no_bias", {{{6, 9}}}, ba(std::nullopt, 0.4, false)});
  // Max pooling with its dropout (the CUDA kernels for channels-last disjoint windows; elsewhere
  // pool then dropout).
  auto pool_drop = [=](int C_last, double p) {
    return [=](V x) {
      manual_seed(42);
      Pool2dParams q;
      return max_pool2d(C_last ? contiguous(x[0], CL) : x[0], q, p, true);
    };
  };
  c.push_back({"max_pool2d_dropout_channels_last", {{{2, 8, 6, 4}}}, pool_drop(1, 0.3)});
  c.push_back({"max_pool2d_channels_last_vec_odd_edge", {{{2, 8, 5, 7}}}, pool_drop(1, 0.0)});
  c.push_back({"max_pool2d_dropout_nchw", {{{2, 3, 4, 4}}}, pool_drop(0, 0.3)});
  c.push_back({"channels_last_round_trip", {{{3, 5, 4, 3}}}, [=](V x) { return contiguous(contiguous(x[0], CL)) * 2.0; }});
  auto bn = [](V x) {
    int64_t C = x[0].size(1);
    // The running statistics in the parameters' dtype (float32 beside half activations).
    Tensor rm = zeros(Shape{C}, x[1].dtype(), x[1].device()), rv = ones(Shape{C}, x[1].dtype(), x[1].device());
    return batch_norm(x[0], x[1], x[2], rm, rv, true, 0.1, 1e-5);
  };
  c.push_back({"batch_norm_2d", {{{5, 3}}, {{3}}, {{3}}}, bn});
  c.push_back({"batch_norm_4d", {{{2, 3, 4, 5}}, {{3}}, {{3}}}, bn});
  c.push_back({"mlp_chain", {{{4, 6}}, {{5, 6}}, {{5}}, {{3, 5}}, {{4}, Kind::Labels, 3}},
               [](V x) {
                 Tensor h = relu(linear(x[0], x[1], x[2]));
                 return cross_entropy(matmul(h, transpose(x[3], 0, 1)), x[4]);
               }});
  // LSTM: every output feeds the loss, so the gradient flows through y, h and c alike.
  auto lstm_case = [](LstmParams p) {
    return [p](V x) {
      LstmResult r = lstm(x[0], x[1], p, true);
      return sum(r.y * r.y) + sum(r.h) + sum(r.c * r.c);
    };
  };
  LstmParams one{4, 5};
  c.push_back({"lstm_1layer", {{{2, 3, 4}}, {{lstm_weight_count(one)}}}, lstm_case(one), 4});
  LstmParams two{2, 3, 2, true};
  c.push_back({"lstm_2layer_bidirectional", {{{3, 4, 2}}, {{lstm_weight_count(two)}}}, lstm_case(two), 4});
  return c;
}

}  // namespace loupe::test
