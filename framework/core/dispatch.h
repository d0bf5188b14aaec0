// Device dispatch without #ifdef: each op family defines a table of kernel function pointers;
// its _cpu.cpp and _cuda.cu files register one table each at load time. A CPU-only build simply
// has no CUDA table, and asking for one says so.
#pragma once
#include "core/dtype.h"
#include "core/error.h"

namespace loupe {

template <class Table>
struct Backends {
  static inline const Table* table[kNumDeviceTypes] = {nullptr, nullptr};
};

template <class Table>
struct RegisterBackend {
  RegisterBackend(DeviceType d, const Table* t) { Backends<Table>::table[int(d)] = t; }
};

template <class Table>
const Table& kernels(Device d) {
  const Table* t = Backends<Table>::table[int(d.type)];
  if (!t) throw Error("this loupe was built without CUDA support, so " + d.str() +
                      " tensors are not available; rebuild with the CUDA Toolkit and cuDNN installed, or use --device cpu");
  return *t;
}

}  // namespace loupe
