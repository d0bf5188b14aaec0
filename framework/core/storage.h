// Storage: a block of memory on one device, owned or a view into another (parameter arenas).
#pragma once
#include <cstddef>
#include <memory>

#include "core/dtype.h"

namespace loupe {

class Storage {
 public:
  // Allocates `bytes` on `device` (pinned host memory when `pinned` and CUDA is available).
  Storage(size_t bytes, Device device, bool pinned = false);
  // A view of `bytes` starting `offset` bytes into `base`; keeps base alive.
  Storage(std::shared_ptr<Storage> base, size_t offset, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool pinned_ = false;
  std::shared_ptr<Storage> base_;  // set for views
};

}  // namespace loupe
