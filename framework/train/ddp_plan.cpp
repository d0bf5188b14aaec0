#include "train/ddp_plan.h"

#include <algorithm>

#include "core/error.h"

namespace loupe::train {

std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& slots, int64_t elem_bytes, int64_t cap_bytes,
                                 int64_t first_cap_bytes) {
  LOUPE_CHECK(elem_bytes > 0 && cap_bytes > 0 && first_cap_bytes > 0, "plan_buckets: sizes must be positive");
  for (size_t i = 1; i < slots.size(); ++i)
    LOUPE_CHECK(slots[i].offset >= slots[i - 1].offset + slots[i - 1].numel,
                "plan_buckets: parameter ", i, " overlaps or precedes parameter ", i - 1, " in the arena");
  std::vector<Bucket> out;
  Bucket cur;
  int64_t lo = 0, hi = 0, bytes = 0;
  auto close = [&] {
    if (cur.params.empty()) return;
    cur.offset = lo;
    cur.numel = hi - lo;
    out.push_back(std::move(cur));
    cur = Bucket();
    bytes = 0;
  };
  for (int i = int(slots.size()) - 1; i >= 0; --i) {
    const ParamSlot& p = slots[size_t(i)];
    if (cur.params.empty()) hi = p.offset + p.numel;
    cur.params.push_back(i);
    lo = p.offset;
    bytes += p.numel * elem_bytes;
    if (bytes >= (out.empty() ? first_cap_bytes : cap_bytes)) close();
  }
  close();
  return out;
}

}  // namespace loupe::train
