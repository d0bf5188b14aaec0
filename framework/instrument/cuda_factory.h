// The maker of a CUDA-only instrument (the busy tracker, the counters, the graph-node map): its
// .cu file registers it at load time, and a build without CUDA has none, which make() says.
#pragma once
#include <memory>
#include <string>

namespace loupe::instrument {

template <class T>
class CudaFactory {
 public:
  using Fn = std::unique_ptr<T> (*)(std::string* why);
  static void set(Fn f) { slot() = f; }
  // The instrument, or null with *why (when given) saying why: `without_cuda` where none is
  // registered; `no_reason` (when given) where the maker failed and said nothing.
  static std::unique_ptr<T> make(std::string* why, const char* without_cuda, const char* no_reason) {
    std::string local;
    std::string& w = why ? *why : local;
    if (!slot()) {
      w = without_cuda;
      return nullptr;
    }
    std::unique_ptr<T> made = slot()(&w);
    if (!made && w.empty() && no_reason) w = no_reason;
    return made;
  }

 private:
  static Fn& slot() {
    static Fn f = nullptr;
    return f;
  }
};

}  // namespace loupe::instrument
