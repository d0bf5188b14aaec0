// The CUDA runtime behind CudaRuntime: a non-blocking compute stream, the stream-ordered memory
// pool (cudaMallocAsync) with memory kept cached between steps, and checked errors.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/cuda_util.cuh"

namespace loupe::cuda {

namespace {
const char* short_path(const char* f) {
  const char* p = std::strstr(f, "framework/");
  return p ? p : f;
}

std::string hint_for(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return "HINT: the GPU is out of memory; try a smaller --batch, or check nvidia-smi for other processes";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "HINT: no usable GPU or driver; run with --device cpu";
    case cudaErrorNoKernelImageForDevice:
      return "HINT: this build has no code for this GPU; rebuild with -DCMAKE_CUDA_ARCHITECTURES=<its compute capability>";
    default: return "";
  }
}

// cuBLAS's workspace, set once: with one of its own, cuBLAS never allocates inside a captured
// graph (32 MiB: what NVIDIA recommends for Hopper).
constexpr size_t kCublasWorkspace = size_t(32) << 20;

// The lane's cuBLAS handle, bound to its stream, with a workspace of its own, and its cuBLASLt
// handle, which uses the same workspace.
void make_cublas(ExecLane& l) {
  cublasHandle_t h = nullptr;
  void* workspace = nullptr;
  LOUPE_CUBLAS_CHECK(cublasCreate(&h));
  LOUPE_CUBLAS_CHECK(cublasSetStream(h, l.stream));
  LOUPE_CUDA_CHECK(cudaMalloc(&workspace, kCublasWorkspace));
  LOUPE_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, kCublasWorkspace));
  // fp32 GEMMs stay in full fp32 (no TF32) unless a precision mode asks otherwise.
  LOUPE_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  l.cublas = h;
  LOUPE_CUBLAS_CHECK(cublasLtCreate(&l.lt));
  l.workspace = workspace;
  l.workspace_bytes = kCublasWorkspace;
}

ExecLane& state() {
  static ExecLane s;
  static std::once_flag once;
  std::call_once(once, [] {
    LOUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    // Keep freed memory in the pool instead of returning it to the driver at every sync.
    cudaMemPool_t pool;
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    uint64_t threshold = UINT64_MAX;
    LOUPE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    make_cublas(s);
  });
  return s;
}

cudaMemPool_t mem_pool() {
  cudaMemPool_t p;
  int dev = 0;
  LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
  LOUPE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&p, dev));
  return p;
}
}  // namespace

void fail_cuda(cudaError_t e, const char* call, const char* file, int line) {
  std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + call +
                    " at " + short_path(file) + ":" + std::to_string(line);
  std::string h = hint_for(e);
  if (!h.empty()) msg += "\n" + h;
  throw Error(msg);
}

void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  std::string msg = std::string("cuBLAS error ") + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) +
                    ") in " + call + " at " + short_path(file) + ":" + std::to_string(line);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) msg += "\nHINT: the GPU is out of memory; try a smaller --batch";
  throw Error(msg);
}

cudaStream_t stream() { return state().stream; }
cudaStream_t stream(const ExecContext& c) { return lane(c).stream; }
ExecLane& default_lane() { return state(); }
ExecLane* new_lane() {
  state();  // the runtime (device, memory pool) first
  auto* l = new ExecLane;  // lives until the process ends, as its stream does
  LOUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
  make_cublas(*l);
  return l;
}

namespace {
std::atomic<int> g_comm_sms{24};
}  // namespace
int comm_sms() { return g_comm_sms.load(); }
cublasHandle_t cublas() { return state().cublas; }
cublasHandle_t cublas(const ExecContext& c) { return lane(c).cublas; }

namespace {
__global__ void u64_set_kernel(uint64_t* w, uint64_t v) {
  *w = v;
}
__global__ void u64_add_kernel(uint64_t* w, uint64_t v) {
  *w += v;
}

cudaMemcpyKind memcpy_kind(CopyKind k) {
  return k == CopyKind::HostToDevice ? cudaMemcpyHostToDevice
         : k == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyDeviceToDevice;
}

class Runtime final : public CudaRuntime {
 public:
  int current_device() override {
    int d = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&d));
    return d;
  }
  void set_current_device(int device) override { LOUPE_CUDA_CHECK(cudaSetDevice(device)); }
  int device_count() override {
    static const int n = [] {
      int c = 0;
      if (cudaGetDeviceCount(&c) != cudaSuccess) {
        cudaGetLastError();  // clear the "no device" error
        return 0;
      }
      return c;
    }();
    return n;
  }
  void* alloc(size_t bytes) override {
    const cudaStream_t s = stream();
    void* p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, bytes, s);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_b = 0, total = 0;
      cudaMemGetInfo(&free_b, &total);
      throw Error("the GPU is out of memory allocating " + std::to_string(bytes >> 20) + " MiB (" +
                  std::to_string(free_b >> 20) + " of " + std::to_string(total >> 20) +
                  " MiB free)\nHINT: try a smaller --batch");
    }
    LOUPE_CUDA_CHECK(e);
    return p;
  }
  void free(void* p) override {
    const cudaStream_t s = stream();
    cudaError_t e = cudaFreeAsync(p, s);
    if (e != cudaSuccess && capturing_) {
      // A capture that failed part-way refuses stream work until it ends: free after it.
      cudaGetLastError();
      deferred_frees_.push_back(p);
      return;
    }
    LOUPE_CUDA_CHECK(e);
  }
  void* alloc_pinned(size_t bytes) override {
    void* p = nullptr;
    LOUPE_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    return p;
  }
  void free_pinned(void* p) override { LOUPE_CUDA_CHECK(cudaFreeHost(p)); }
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    const cudaStream_t s = stream();
    LOUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), s));
    // Host buffers may be reused or read as soon as we return.
    if (kind != CopyKind::DeviceToDevice) LOUPE_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  void memset_zero(void* p, size_t bytes) override {
    const cudaStream_t s = stream();
    LOUPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
  }
  void synchronize() override { LOUPE_CUDA_CHECK(cudaStreamSynchronize(stream())); }
  std::string device_name() override {
    cudaDeviceProp p{};
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    return p.name;
  }
  std::string pci_bus_id() override {
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    return pci_bus_id(dev);
  }
  std::string pci_bus_id(int device) override {
    char id[32] = {};
    LOUPE_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device));
    return id;
  }
  int compute_capability() override {
    int dev = 0, major = 0, minor = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major * 10 + minor;
  }
  size_t bytes_in_use() override {
    uint64_t v = 0;
    LOUPE_CUDA_CHECK(cudaMemPoolGetAttribute(mem_pool(), cudaMemPoolAttrUsedMemCurrent, &v));
    return size_t(v);
  }
  size_t peak_bytes_in_use() override {
    uint64_t v = 0;
    LOUPE_CUDA_CHECK(cudaMemPoolGetAttribute(mem_pool(), cudaMemPoolAttrUsedMemHigh, &v));
    return size_t(v);
  }
  size_t free_bytes() override {
    size_t free_b = 0, total = 0;
    uint64_t reserved = 0, used = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (cudaMemPoolGetAttribute(mem_pool(), cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(mem_pool(), cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess && reserved > used)
      free_b += size_t(reserved - used);
    return free_b;
  }
  bool event_done(void* e) override {
    cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) return false;
    LOUPE_CUDA_CHECK(r);
    return true;
  }
  void event_destroy(void* e) override { LOUPE_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(e))); }
  void* stream_create() override {
    cudaStream_t s;
    LOUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  ExecLane* lane_create() override { return new_lane(); }
  void* lane_stream(ExecLane* lane) override { return (lane ? *lane : default_lane()).stream; }
  static cudaStream_t pick(void* s) { return s ? static_cast<cudaStream_t>(s) : stream(); }
  void copy_async_on(void* s, void* dst, const void* src, size_t bytes, CopyKind kind) override {
    LOUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(kind), pick(s)));
  }
  void* event_record_on(void* s) override {
    cudaEvent_t e;
    LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    LOUPE_CUDA_CHECK(cudaEventRecord(e, pick(s)));
    return e;
  }
  void* event_create() override {
    cudaEvent_t e;
    LOUPE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void event_record(void* e, void* s) override { LOUPE_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), pick(s))); }
  void stream_wait_event(void* s, void* e) override {
    LOUPE_CUDA_CHECK(cudaStreamWaitEvent(pick(s), static_cast<cudaEvent_t>(e), 0));
  }
  void event_synchronize(void* e) override { LOUPE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e))); }
  void capture_begin() override {
    LOUPE_CHECK(!capturing_, "a CUDA graph capture is already under way");
    // A captured step's tensors are the graph's own memory, not the pool's: the blocks the pool
    // keeps cached from the eager steps before it would leave the graph a GPU already full, so the
    // largest batch that fits would be the eager step's and the graph's together. The pool gives its
    // unused blocks back first (the next eager step grows it again).
    LOUPE_CUDA_CHECK(cudaDeviceSynchronize());
    LOUPE_CUDA_CHECK(cudaMemPoolTrimTo(mem_pool(), 0));
    LOUPE_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
  }
  GraphCapture capture_end() override {
    const cudaStream_t s = stream();
    GraphCapture out;
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    capturing_ = false;
    if (e != cudaSuccess || !graph) {
      out.error = std::string("the capture failed: ") + cudaGetErrorString(e);
      cudaGetLastError();
    }
    // Tensors freed while a failed capture refused work: their memory is the pool's again now
    // (or never existed, if they were allocated inside the capture).
    for (void* p : deferred_frees_)
      if (cudaFreeAsync(p, s) != cudaSuccess) cudaGetLastError();
    deferred_frees_.clear();
    if (!graph) return out;
    size_t n = 0;
    LOUPE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    if (n) LOUPE_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType t;
      LOUPE_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
      out.kernels += t == cudaGraphNodeTypeKernel;
      out.alloc_nodes += t == cudaGraphNodeTypeMemAlloc;
      out.free_nodes += t == cudaGraphNodeTypeMemFree;
    }
    if (out.error.empty()) {
      cudaGraphExec_t exec = nullptr;
      e = cudaGraphInstantiate(&exec, graph, 0);
      if (e == cudaSuccess) e = cudaGraphUpload(exec, s);
      if (e == cudaSuccess) {
        out.exec = exec;
      } else {
        out.error = std::string("instantiating the graph failed: ") + cudaGetErrorString(e);
        cudaGetLastError();
        if (exec) cudaGraphExecDestroy(exec);
      }
    }
    cudaGraphDestroy(graph);
    return out;
  }
  void graph_launch(void* exec) override {
    LOUPE_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream()));
  }
  void graph_destroy(void* exec) override {
    LOUPE_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
    int dev = 0;  // its memory back from the graphs' pool (loupe bench makes one graph per row)
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGraphMemTrim(dev));
  }
  size_t graph_peak_bytes() override { return graph_attr(cudaGraphMemAttrUsedMemHigh); }
  void u64_set(void* w, uint64_t v) override {
    const cudaStream_t s = stream();
    cuda::launch(u64_set_kernel, 1, 1, 0, s, static_cast<uint64_t*>(w), v);
    LOUPE_CUDA_LAUNCH_CHECK();
  }
  void u64_add(void* w, uint64_t v) override {
    const cudaStream_t s = stream();
    cuda::launch(u64_add_kernel, 1, 1, 0, s, static_cast<uint64_t*>(w), v);
    LOUPE_CUDA_LAUNCH_CHECK();
  }
  void profiler_start() override { LOUPE_CUDA_CHECK(cudaProfilerStart()); }
  void profiler_stop() override { LOUPE_CUDA_CHECK(cudaProfilerStop()); }
  void set_comm_sms(int sms) override { g_comm_sms = sms; }
  void reset_peak() override {
    uint64_t zero = 0;
    LOUPE_CUDA_CHECK(cudaMemPoolSetAttribute(mem_pool(), cudaMemPoolAttrUsedMemHigh, &zero));
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceSetGraphMemAttribute(dev, cudaGraphMemAttrUsedMemHigh, &zero));
  }

 private:
  static size_t graph_attr(cudaGraphMemAttributeType a) {
    uint64_t v = 0;
    int dev = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetGraphMemAttribute(dev, a, &v));
    return size_t(v);
  }
  bool capturing_ = false;
  std::vector<void*> deferred_frees_;
};

Runtime g_runtime;
struct Registrar {
  Registrar() { register_cuda_runtime(&g_runtime); }
} g_registrar;
}  // namespace

}  // namespace loupe::cuda
