// The few CUDA runtime services the device-independent code needs (memory, copies, sync),
// behind an interface so that .cpp files never include CUDA headers. Implemented in
// cuda_runtime.cu, which registers itself when loupe is built with CUDA.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace loupe {

struct ExecLane;  // core/exec_context.h

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// What capture_end made of the recorded work.
struct GraphCapture {
  void* exec = nullptr;   // the instantiated graph, or null when the capture failed
  std::string error;      // why it failed
  int kernels = 0;
  int alloc_nodes = 0, free_nodes = 0;  // stream-ordered allocations made and freed inside
};

class CudaRuntime {
 public:
  virtual ~CudaRuntime() = default;
  virtual int device_count() = 0;
  // The calling thread's current device, and making one current. CUDA's is per thread and a thread
  // begins on device 0, so a data-parallel rank on GPU 1 hands its device to the threads it starts
  // (the loader's workers), whose copies were otherwise issued against GPU 0 and failed.
  virtual int current_device() = 0;
  virtual void set_current_device(int device) = 0;
  // Stream-ordered allocation on the compute stream (cudaMallocAsync); free is stream-ordered too.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void* alloc_pinned(size_t bytes) = 0;  // page-locked host memory (cudaHostAlloc)
  virtual void free_pinned(void* p) = 0;
  // Asynchronous on the compute stream, except DeviceToHost, which waits for the copy to land.
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  virtual void memset_zero(void* p, size_t bytes) = 0;
  virtual void synchronize() = 0;  // waits for the compute stream
  virtual std::string device_name() = 0;
  // The current device's PCI address ("0000:19:00.0"): NVML finds the same GPU by it, whatever
  // CUDA_VISIBLE_DEVICES renumbered.
  virtual std::string pci_bus_id() = 0;
  // CUDA device `device`'s (not necessarily the current one: rank 0's timeline samples its host's
  // other ranks' GPUs). Creates no context on it.
  virtual std::string pci_bus_id(int device) = 0;
  virtual int compute_capability() = 0;  // major * 10 + minor, e.g. 90 for Hopper
  virtual size_t bytes_in_use() = 0;       // the pool's current usage
  virtual size_t peak_bytes_in_use() = 0;  // the pool's high-water mark since the last reset
  virtual void reset_peak() = 0;
  // The current device's free memory: what the driver reports free plus what the pool holds
  // unused (freed blocks it keeps for reuse); 0 when it cannot be read (models/memory.h).
  virtual size_t free_bytes() { return 0; }
  // Streams, asynchronous copies and events (the loader's copy stream; the progress bar's loss read
  // through pinned memory). A null stream means the compute stream.
  virtual void* stream_create() = 0;  // non-blocking, lives until the process ends
  // A lane of its own for kernels (core/exec_context.h): a non-blocking stream with cuBLAS and
  // cuDNN handles bound to it; lives until the process ends. Its stream (null: the compute stream's).
  virtual ExecLane* lane_create() = 0;
  virtual void* lane_stream(ExecLane* lane) = 0;
  virtual void copy_async_on(void* stream, void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  virtual void* event_record_on(void* stream) = 0;             // a new event recorded there
  virtual void* event_create() = 0;                            // for reuse with event_record
  virtual void event_record(void* event, void* stream) = 0;    // re-records an existing event
  virtual void stream_wait_event(void* stream, void* event) = 0;  // the stream waits; the host does not
  virtual void event_synchronize(void* event) = 0;             // the host waits
  virtual bool event_done(void* event) = 0;                    // cudaEventQuery: never blocks
  virtual void event_destroy(void* event) = 0;
  // CUDA graphs (train/step_graph.h). Between capture_begin and capture_end the calling thread's
  // work on the compute stream is recorded, not run (thread-local capture mode: the loader's and
  // NVML's threads go on as usual); capture_end instantiates and uploads the graph. A failed
  // capture returns no graph and leaves the stream usable.
  virtual void capture_begin() = 0;
  virtual GraphCapture capture_end() = 0;
  virtual void graph_launch(void* exec) = 0;  // on the compute stream
  virtual void graph_destroy(void* exec) = 0;
  // The high-water mark, since the last reset_peak(), of device memory held by graphs' own
  // (stream-ordered) allocations.
  virtual size_t graph_peak_bytes() = 0;
  // A 64-bit word in device memory, set or advanced by a one-thread kernel on the compute stream
  // (the value is the kernel's argument: no host memory, no wait).
  virtual void u64_set(void* word, uint64_t value) = 0;
  virtual void u64_add(void* word, uint64_t value) = 0;
  // Brackets for `nsys --capture-range=cudaProfilerApi` and `ncu --profile-from-start off`.
  virtual void profiler_start() = 0;
  virtual void profiler_stop() = 0;
  // The SMs the gradient all-reduce holds while backward runs beside it (24 until set): the LSTM's
  // weight GEMMs of the second round are planned for the others. Data parallelism sets it from its
  // own knob (parallel/ddp.h); core reads none of them.
  virtual void set_comm_sms(int sms) = 0;
};

// nullptr when loupe was built without CUDA.
CudaRuntime* cuda_runtime();
void register_cuda_runtime(CudaRuntime* rt);
// True when CUDA support was built and a device is present.
bool cuda_available();

}  // namespace loupe
