// Large host blocks kept for reuse (lab/plans/cpu_backend.md). A CPU training step frees and
// allocates the same large activations every step; glibc hands such blocks back to the kernel
// (mmap/munmap, or trimming the heap) and the next step pays a page fault per 4 KiB touched, on a
// VM several microseconds each: mnist_cnn's CPU step spent half its time there (431 vs 853
// samples/s with the blocks kept). Like the GPU's pool, blocks are kept by size and handed out
// again; small ones are left to malloc, which reuses them itself. Off under AddressSanitizer,
// whose use-after-free checks need every block really freed.
#pragma once
#include <cstddef>

namespace loupe {

// 64-byte aligned; throws loupe::Error when the host is out of memory.
void* host_alloc(size_t bytes);
// `bytes` as given to host_alloc.
void host_free(void* p, size_t bytes);
// Bytes held in the cache, free for reuse (for tests).
size_t host_cached_bytes();

}  // namespace loupe
