#include "parallel/ddp_plan.h"

#include <algorithm>

#include "core/error.h"

namespace loupe::parallel {

std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& slots, int64_t elem_bytes, int64_t cap_bytes,
                                 int64_t first_cap_bytes) {
  std::vector<int> order;
  for (int i = int(slots.size()) - 1; i >= 0; --i) order.push_back(i);
  return plan_buckets(slots, order, {}, elem_bytes, cap_bytes, first_cap_bytes);
}

std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& slots, const std::vector<int>& order,
                                 const std::vector<size_t>& pauses, int64_t elem_bytes, int64_t cap_bytes,
                                 int64_t first_cap_bytes) {
  LOUPE_CHECK(elem_bytes > 0 && cap_bytes > 0 && first_cap_bytes > 0, "plan_buckets: sizes must be positive");
  for (size_t i = 1; i < slots.size(); ++i)
    LOUPE_CHECK(slots[i].offset >= slots[i - 1].offset + slots[i - 1].numel,
                "plan_buckets: parameter ", i, " overlaps or precedes parameter ", i - 1, " in the arena");
  std::vector<int> seen(slots.size(), 0);
  for (int i : order) {
    LOUPE_CHECK(i >= 0 && size_t(i) < slots.size() && !seen[size_t(i)]++, "plan_buckets: the order names parameter ",
                i, " twice or out of range");
  }
  LOUPE_CHECK(order.size() == slots.size(), "plan_buckets: the order names ", order.size(), " of ", slots.size(),
              " parameters");
  std::vector<Bucket> out;
  Bucket cur;
  int first = 0, last = 0;  // the bucket's parameters are slots first..last
  int64_t bytes = 0;
  auto close = [&] {
    if (cur.params.empty()) return;
    cur.offset = slots[size_t(first)].offset;
    cur.numel = slots[size_t(last)].offset + slots[size_t(last)].numel - cur.offset;
    out.push_back(std::move(cur));
    cur = Bucket();
    bytes = 0;
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    if (!cur.params.empty() && i != first - 1 && i != last + 1) close();
    if (cur.params.empty()) first = last = i;
    first = std::min(first, i);
    last = std::max(last, i);
    cur.params.push_back(i);
    bytes += slots[size_t(i)].numel * elem_bytes;
    const bool pause = std::find(pauses.begin(), pauses.end(), k + 1) != pauses.end();
    if (pause || bytes >= (out.empty() ? first_cap_bytes : cap_bytes)) close();
  }
  close();
  return out;
}

}  // namespace loupe::parallel
