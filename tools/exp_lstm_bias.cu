// Experiment: GPU time of cuDNN's LSTM forward, backward-data and backward-weights per bias mode
// (double, single input, none), algorithm and data type, at the reference models' shapes. It asks
// where GENERIC_elementWise_bp2 (the bias gradient, 30-50 % of an fp16 LSTM step in profiles of
// loupe and PyTorch alike) can be avoided.
//   nvcc -O2 -arch=sm_90 tools/exp_lstm_bias.cu -lcudnn -o /tmp/exp_lstm_bias && /tmp/exp_lstm_bias
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    auto s_ = (x);                                                                              \
    if (int(s_) != 0) {                                                                         \
      std::printf("error %d at line %d: %s\n", int(s_), __LINE__, #x);                          \
      return -1.f;                                                                              \
    }                                                                                           \
  } while (0)

struct Shape {
  const char* name;
  int N, T, I, H;
  bool bi;
};

__global__ void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = (unsigned char)((i * 2654435761u + seed) >> 24) & 0x3b;  // small finite values in fp16 and fp32
}

void* buf(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes < 16 ? 16 : bytes);
  fill<<<1024, 256>>>(static_cast<unsigned char*>(p), bytes, 7);
  return p;
}

// Milliseconds for fwd, bwd data, bwd weights (median-free: the mean of 10 after 3 warm-ups).
float run(cudnnHandle_t h, const Shape& s, cudnnDataType_t dt, cudnnRNNAlgo_t algo, cudnnRNNBiasMode_t bias,
          float* ms3, cudnnWgradMode_t wmode = CUDNN_WGRAD_MODE_ADD) {
  const size_t es = dt == CUDNN_DATA_FLOAT ? 4 : 2;
  cudnnDropoutDescriptor_t drop;
  CK(cudnnCreateDropoutDescriptor(&drop));
  size_t ds = 0;
  CK(cudnnDropoutGetStatesSize(h, &ds));
  void* dstate = buf(ds);
  CK(cudnnSetDropoutDescriptor(drop, h, 0.f, dstate, ds, 1));
  cudnnRNNDescriptor_t rnn;
  CK(cudnnCreateRNNDescriptor(&rnn));
  CK(cudnnSetRNNDescriptor_v8(rnn, algo, CUDNN_LSTM, bias, s.bi ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                              CUDNN_LINEAR_INPUT, dt, CUDNN_DATA_FLOAT,
                              dt != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH, s.I, s.H, s.H, 1, drop,
                              CUDNN_RNN_PADDED_IO_DISABLED));
  const int D = s.bi ? 2 : 1;
  std::vector<int> lens(s.N, s.T);
  cudnnRNNDataDescriptor_t xd, yd;
  CK(cudnnCreateRNNDataDescriptor(&xd));
  CK(cudnnCreateRNNDataDescriptor(&yd));
  CK(cudnnSetRNNDataDescriptor(xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, s.T, s.N, s.I, lens.data(), nullptr));
  CK(cudnnSetRNNDataDescriptor(yd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, s.T, s.N, D * s.H, lens.data(),
                               nullptr));
  cudnnTensorDescriptor_t hd;
  CK(cudnnCreateTensorDescriptor(&hd));
  int dims[3] = {D, s.N, s.H}, str[3] = {s.N * s.H, s.H, 1};
  CK(cudnnSetTensorNdDescriptor(hd, dt, 3, dims, str));
  size_t wbytes = 0, work = 0, reserve = 0;
  CK(cudnnGetRNNWeightSpaceSize(h, rnn, &wbytes));
  CK(cudnnGetRNNTempSpaceSizes(h, rnn, CUDNN_FWD_MODE_TRAINING, xd, &work, &reserve));
  void *x = buf(size_t(s.N) * s.T * s.I * es), *y = buf(size_t(s.N) * s.T * D * s.H * es);
  void *dx = buf(size_t(s.N) * s.T * s.I * es), *dy = buf(size_t(s.N) * s.T * D * s.H * es);
  void *hy = buf(size_t(D) * s.N * s.H * es), *cy = buf(size_t(D) * s.N * s.H * es);
  void *w = buf(wbytes), *dw = buf(wbytes), *ws = buf(work), *rs = buf(reserve);
  int* seq = nullptr;
  cudaMalloc(&seq, s.N * sizeof(int));
  cudaMemcpy(seq, lens.data(), s.N * sizeof(int), cudaMemcpyHostToDevice);
  cudaEvent_t e[4];
  for (auto& ev : e) cudaEventCreate(&ev);
  float sum[3] = {0, 0, 0};
  for (int it = 0; it < 13; ++it) {
    cudaEventRecord(e[0]);
    CK(cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_TRAINING, seq, xd, x, yd, y, hd, nullptr, hy, hd, nullptr, cy, wbytes, w,
                       work, ws, reserve, rs));
    cudaEventRecord(e[1]);
    CK(cudnnRNNBackwardData_v8(h, rnn, seq, yd, y, dy, xd, dx, hd, nullptr, nullptr, nullptr, hd, nullptr, nullptr,
                               nullptr, wbytes, w, work, ws, reserve, rs));
    cudaEventRecord(e[2]);
    cudaMemsetAsync(dw, 0, wbytes);
    CK(cudnnRNNBackwardWeights_v8(h, rnn, wmode, seq, xd, x, hd, nullptr, yd, y, wbytes, dw, work, ws,
                                  reserve, rs));
    cudaEventRecord(e[3]);
    cudaEventSynchronize(e[3]);
    if (it < 3) continue;
    for (int k = 0; k < 3; ++k) {
      float t = 0;
      cudaEventElapsedTime(&t, e[k], e[k + 1]);
      sum[k] += t / 10;
    }
  }
  for (int k = 0; k < 3; ++k) ms3[k] = sum[k];
  for (void* p : {x, y, dx, dy, hy, cy, w, dw, ws, rs, dstate}) cudaFree(p);
  cudaFree(seq);
  cudnnDestroyRNNDescriptor(rnn);
  cudnnDestroyDropoutDescriptor(drop);
  return sum[0] + sum[1] + sum[2];
}

int main() {
  cudnnHandle_t h;
  cudnnCreate(&h);
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  const Shape shapes[] = {{"imdb_bilstm N=1024", 1024, 100, 128, 64, true},
                          {"char_lstm   N=1024", 1024, 40, 57, 128, false},
                          {"char_lstm   N=128 ", 128, 40, 57, 128, false},
                          {"imdb_bilstm N=128 ", 128, 100, 128, 64, true}};
  const char* bias_name[] = {"none", "single_inp", "double", "single_rec"};
  // The persistent kernel takes only double bias; the standard algorithm shows what the bias
  // gradient costs (none against double); bfloat16 against float16; and WGRAD_MODE_SET.
  for (const Shape& s : shapes)
    for (cudnnDataType_t dt : {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT})
      for (cudnnRNNAlgo_t algo : {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_STANDARD})
        for (cudnnRNNBiasMode_t b : {CUDNN_RNN_DOUBLE_BIAS, CUDNN_RNN_NO_BIAS})
          for (cudnnWgradMode_t wm : {CUDNN_WGRAD_MODE_ADD, CUDNN_WGRAD_MODE_SET}) {
            if (algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H && b != CUDNN_RNN_DOUBLE_BIAS) continue;
            if (wm == CUDNN_WGRAD_MODE_SET && (b != CUDNN_RNN_DOUBLE_BIAS || dt == CUDNN_DATA_FLOAT)) continue;
            float ms[3] = {0, 0, 0};
            float t = run(h, s, dt, algo, b, ms, wm);
            std::printf("%s %s %-8s bias %-6s wgrad %s  fwd %6.3f  bwd data %6.3f  bwd weights %6.3f  total %6.3f ms\n",
                        s.name, dt == CUDNN_DATA_HALF ? "fp16" : dt == CUDNN_DATA_BFLOAT16 ? "bf16" : "fp32",
                        algo == CUDNN_RNN_ALGO_STANDARD ? "standard" : "small_h", bias_name[b],
                        wm == CUDNN_WGRAD_MODE_ADD ? "add" : "set", ms[0], ms[1], ms[2], t);
          }
  return 0;
}
