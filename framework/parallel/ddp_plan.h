// Data parallelism: which stretches of the gradient arena are all-reduced together
// (docs/multi-gpu.md). The arena holds the parameters' gradients contiguously in registration order
// (nn/arena.h); backward finishes them roughly in reverse, so buckets are cut from the last
// parameters to the first, and each bucket is one contiguous slice of the arena (the alignment
// padding between parameters included: averaging zeros costs nothing), all-reduced in place with no
// copies as soon as its last parameter's gradient is in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace loupe::parallel {

struct ParamSlot {
  int64_t offset = 0, numel = 0;  // in the gradient arena, in elements
};

struct Bucket {
  int64_t offset = 0, numel = 0;  // the arena slice [offset, offset + numel)
  std::vector<int> params;        // indices into the slots, in the order backward finishes them
};

// Buckets in the order they become ready: from the last parameter back, each closed once it
// holds at least cap_bytes (a parameter larger than the cap is a bucket alone; the first bucket
// is kept small, at most first_cap_bytes, so communication starts early in the backward pass, as
// PyTorch's DDP does with its 1 MiB first bucket). Every parameter is in exactly one bucket.
std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& slots, int64_t elem_bytes, int64_t cap_bytes,
                                 int64_t first_cap_bytes);

// The same for an order seen (the reducer's first backward pass, as PyTorch's DDP rebuilds its
// buckets after the first iteration): `order` holds every parameter once, as backward finished
// them; a bucket also closes after each position in `pauses` (backward paused there for long work:
// Node::later_inputs), and where the next parameter does not extend its slice of the arena, so
// that every bucket stays one contiguous slice.
std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& slots, const std::vector<int>& order,
                                 const std::vector<size_t>& pauses, int64_t elem_bytes, int64_t cap_bytes,
                                 int64_t first_cap_bytes);

}  // namespace loupe::parallel
