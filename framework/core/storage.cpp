#include "core/storage.h"

#include <cstdlib>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/host_cache.h"

namespace loupe {

namespace {
CudaRuntime*& runtime_slot() {
  static CudaRuntime* rt = nullptr;
  return rt;
}
CudaRuntime& need_cuda() {
  CudaRuntime* rt = cuda_runtime();
  if (!rt) throw Error("this loupe was built without CUDA support; use --device cpu or rebuild with the CUDA Toolkit");
  return *rt;
}
}  // namespace

CudaRuntime* cuda_runtime() { return runtime_slot(); }
void register_cuda_runtime(CudaRuntime* rt) { runtime_slot() = rt; }
bool cuda_available() { return cuda_runtime() && cuda_runtime()->device_count() > 0; }

Storage::Storage(size_t bytes, Device device, bool pinned) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cuda()) {
    data_ = need_cuda().alloc(bytes);
  } else if (pinned && cuda_available()) {
    data_ = cuda_runtime()->alloc_pinned(bytes);
    pinned_ = true;
  } else {
    data_ = host_alloc(bytes);  // 64-byte aligned, large blocks reused (core/host_cache.h)
  }
}

Storage::Storage(std::shared_ptr<Storage> base, size_t offset, size_t bytes)
    : data_(static_cast<char*>(base->data()) + offset), bytes_(bytes), device_(base->device()),
      pinned_(base->pinned()), base_(std::move(base)) {}

Storage::~Storage() {
  if (base_ || !data_) return;
  if (device_.is_cuda()) cuda_runtime()->free(data_);
  else if (pinned_) cuda_runtime()->free_pinned(data_);
  else host_free(data_, bytes_);
}

}  // namespace loupe
