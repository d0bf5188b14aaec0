// A reproducer, outside loupe, of the slowdown docs/performance.md describes under "Tuning a run":
// in one process, CUDA graphs replay slower after one of cuDNN's FFT convolutions has run.
// It times one graph of many small dependent kernels, runs a convolution (forward and the filter's
// gradient) in the layout and type asked for, and times a fresh capture of the same graph again.
//
//   nvcc -O2 -arch=sm_90 dev/repro_graph_gaps.cu -lcudnn -o /tmp/repro_graph_gaps
//   /tmp/repro_graph_gaps none | nchw-f32 | nhwc-f32 | nhwc-f16 [find] [alloc]
//
// `find`: the algorithms cudnnFind* times (every candidate run, as loupe chooses) instead of the
// heuristics' first. FWD_ALGO=N and FILTER_ALGO=N force one algorithm; FWD_ONLY=1 runs only the
// forward. On one H200 (cuDNN 9.14): forward algorithms 4 and 5 (FFT, FFT_TILING) and the
// filter's 2 (FFT) slow every later graph node; the others and the heuristics' choices do not. `alloc`: the graph also allocates and frees a buffer from the stream-ordered
// pool every ten kernels (graph memory nodes, as loupe's captured step has). Prints the
// microseconds per replay before and after, and their ratio; with `none` the two should agree
// within the machine's noise.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    auto e_ = (x);                                                                        \
    if (e_ != 0) {                                                                        \
      std::fprintf(stderr, "%s failed (%d) at line %d\n", #x, int(e_), __LINE__);         \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__global__ void tick(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + 1.0f;
}

// One capture of `nodes` dependent kernels, replayed `reps` times after a warm-up: us per replay.
double time_graph(cudaStream_t s, float* buf, int nodes, int reps, bool alloc) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < nodes; ++k) {
    if (alloc && k % 10 == 0) {
      void* p = nullptr;
      CHECK(cudaMallocAsync(&p, size_t(1) << 20, s));
      tick<<<64, 256, 0, s>>>(static_cast<float*>(p), 64 * 256);
      CHECK(cudaFreeAsync(p, s));
    }
    tick<<<64, 256, 0, s>>>(buf, 64 * 256);
  }
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  for (int k = 0; k < 50; ++k) CHECK(cudaGraphLaunch(e, s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, s));
  for (int k = 0; k < reps; ++k) CHECK(cudaGraphLaunch(e, s));
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
  return 1000.0 * ms / reps;
}

// cifar10_cnn's first convolution (128 x 3 x 32 x 32, 32 filters of 3 x 3, padding 1): forward and
// the filter's gradient, with the algorithms cuDNN's heuristics rank first.
void run_conv(cudaStream_t s, bool nhwc, cudnnDataType_t type, bool find) {
  cudnnHandle_t h;
  CHECK(cudnnCreate(&h));
  CHECK(cudnnSetStream(h, s));
  const cudnnTensorFormat_t f = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CHECK(cudnnCreateTensorDescriptor(&xd));
  CHECK(cudnnCreateTensorDescriptor(&yd));
  CHECK(cudnnCreateFilterDescriptor(&wd));
  CHECK(cudnnCreateConvolutionDescriptor(&cd));
  CHECK(cudnnSetTensor4dDescriptor(xd, f, type, 128, 3, 32, 32));
  CHECK(cudnnSetTensor4dDescriptor(yd, f, type, 128, 32, 32, 32));
  CHECK(cudnnSetFilter4dDescriptor(wd, type, f, 32, 3, 3, 3));
  CHECK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK(cudnnSetConvolutionMathType(cd, type == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  const size_t elt = type == CUDNN_DATA_FLOAT ? 4 : 2;
  void *x, *y, *w, *ws;
  CHECK(cudaMalloc(&x, 128 * 3 * 32 * 32 * elt));
  CHECK(cudaMalloc(&y, 128 * 32 * 32 * 32 * elt));
  CHECK(cudaMalloc(&w, 32 * 3 * 3 * 3 * elt));
  const size_t ws_bytes = size_t(256) << 20;
  CHECK(cudaMalloc(&ws, ws_bytes));
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[8];
  cudnnConvolutionBwdFilterAlgoPerf_t bp[8];
  int m = 0;
  if (find) {
    CHECK(cudnnFindConvolutionForwardAlgorithm(h, xd, wd, cd, yd, 8, &n, fp));
    CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, xd, yd, cd, wd, 8, &m, bp));
  } else {
    CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &n, fp));
    CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 8, &m, bp));
  }
  const float one = 1, zero = 0;
  if (const char* a = std::getenv("FWD_ALGO")) fp[0].algo = cudnnConvolutionFwdAlgo_t(std::atoi(a));
  if (const char* a = std::getenv("FILTER_ALGO")) bp[0].algo = cudnnConvolutionBwdFilterAlgo_t(std::atoi(a));
  if (std::getenv("FWD_ONLY")) {
    for (int k = 0; k < 20; ++k)
      CHECK(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, fp[0].algo, ws, ws_bytes, &zero, yd, y));
    CHECK(cudaStreamSynchronize(s));
    std::printf("conv: forward algo %d only\n", int(fp[0].algo));
    return;
  }
  for (int k = 0; k < 20; ++k) {
    CHECK(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, fp[0].algo, ws, ws_bytes, &zero, yd, y));
    CHECK(cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd, bp[0].algo, ws, ws_bytes, &zero, wd, w));
  }
  CHECK(cudaStreamSynchronize(s));
  std::printf("conv: forward algo %d, filter algo %d\n", int(fp[0].algo), int(bp[0].algo));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(w));
  CHECK(cudaFree(ws));
  CHECK(cudnnDestroy(h));
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "none";
  bool find = false, alloc = false;
  for (int i = 2; i < argc; ++i) {
    find = find || std::strcmp(argv[i], "find") == 0;
    alloc = alloc || std::strcmp(argv[i], "alloc") == 0;
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* buf;
  CHECK(cudaMalloc(&buf, 64 * 256 * sizeof(float)));
  CHECK(cudaMemset(buf, 0, 64 * 256 * sizeof(float)));
  const int nodes = 200, reps = 2000;
  const double before = time_graph(s, buf, nodes, reps, alloc);
  if (std::strcmp(mode, "nchw-f32") == 0) run_conv(s, false, CUDNN_DATA_FLOAT, find);
  if (std::strcmp(mode, "nhwc-f32") == 0) run_conv(s, true, CUDNN_DATA_FLOAT, find);
  if (std::strcmp(mode, "nhwc-f16") == 0) run_conv(s, true, CUDNN_DATA_HALF, find);
  const double after = time_graph(s, buf, nodes, reps, alloc);
  std::printf("%s%s%s: %.2f us a replay before, %.2f after (%.3fx; %d kernels a graph)\n", mode,
              find ? " find" : "", alloc ? " alloc" : "", before, after, after / before, nodes);
  return 0;
}
