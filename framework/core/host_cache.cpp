#include "core/host_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define LOUPE_HOST_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOUPE_HOST_CACHE 0
#endif
#endif
#ifndef LOUPE_HOST_CACHE
#define LOUPE_HOST_CACHE 1
#endif

namespace loupe {
namespace {

constexpr size_t kMinCached = size_t(256) << 10;  // below this malloc's own bins reuse blocks

size_t rounded(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// At most a quarter of the machine's memory (and 8 GiB) waits in the cache; beyond it a freed
// block goes back to the system.
size_t cache_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const size_t ram = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : size_t(4) << 30;
  return std::min(ram / 4, size_t(8) << 30);
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;  // by rounded size
  size_t held = 0;
  const size_t limit = cache_limit();
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be freed during static destruction
  return *c;
}

}  // namespace

void* host_alloc(size_t bytes) {
  const size_t size = rounded(std::max<size_t>(bytes, 64));
  if (LOUPE_HOST_CACHE && size >= kMinCached) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(size);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.held -= size;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, size);
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void host_free(void* p, size_t bytes) {
  if (!p) return;
  const size_t size = rounded(std::max<size_t>(bytes, 64));
  if (LOUPE_HOST_CACHE && size >= kMinCached) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.held + size <= c.limit) {
      c.free[size].push_back(p);
      c.held += size;
      return;
    }
  }
  std::free(p);
}

size_t host_cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.held;
}

}  // namespace loupe
