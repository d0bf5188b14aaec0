#include "core/denormals.h"

#include <atomic>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define LOUPE_MXCSR 1
#endif

namespace loupe {
namespace {

// The setting, and a generation that changes with it, so a thread re-reads its register only after
// a change: one relaxed load per call otherwise.
std::atomic<bool> g_flush{false};
std::atomic<unsigned> g_generation{1};
thread_local unsigned t_seen = 0;

#if LOUPE_MXCSR
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bit 15 flush-to-zero, bit 6 denormals-are-zero
#endif

void set_this_thread(bool on) {
#if LOUPE_MXCSR
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kFtzDaz) : (csr & ~kFtzDaz));
#else
  (void)on;
#endif
}

}  // namespace

void set_flush_denormals(bool on) {
  g_flush.store(on);
  g_generation.fetch_add(1);
  apply_denormal_mode();
}

bool flush_denormals() { return g_flush.load(); }

void apply_denormal_mode() {
  const unsigned gen = g_generation.load(std::memory_order_acquire);
  if (t_seen == gen) return;
  set_this_thread(g_flush.load());
  t_seen = gen;
}

bool thread_flushes_denormals() {
#if LOUPE_MXCSR
  return (_mm_getcsr() & kFtzDaz) == kFtzDaz;
#else
  return false;
#endif
}

}  // namespace loupe
