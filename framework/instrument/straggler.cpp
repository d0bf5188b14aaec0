#include "instrument/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loupe::instrument {
namespace {

// About three significant digits, whole milliseconds from 100 up (no exponent); n/a unmeasured.
std::string ms(const Opt& v) {
  if (!v || !std::isfinite(*v)) return "n/a";
  char b[32];
  std::snprintf(b, sizeof b, std::fabs(*v) >= 99.5 ? "%.0f ms" : "%.3g ms", *v);
  return b;
}

std::string pct_or_na(const Opt& v) {
  if (!v || !std::isfinite(*v)) return "n/a";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * *v);
  return b;
}

// "step p50 A ms / p95 B ms, data wait p50 C ms"; `label` false drops the p50/p95 words (the others').
std::string step_and_wait(const RankFigures& f, bool label) {
  return std::string("step ") + (label ? "p50 " : "") + ms(f.step_ms_p50) + (label ? " / p95 " : " / ") +
         ms(f.step_ms_p95) + ", data wait " + (label ? "p50 " : "") + ms(f.data_wait_ms_p50);
}

}  // namespace

Opt median_of(std::vector<Opt> values) {
  std::vector<double> v;
  for (const Opt& x : values)
    if (x && std::isfinite(*x)) v.push_back(*x);
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string straggler_line(const std::vector<RankFigures>& ranks, const Straggler& s) {
  std::string o = "  slowest rank ";
  if (s.rank) {
    o += std::to_string(*s.rank) + ": " + step_and_wait(s.slowest, true) +
         (ranks.size() > 2 ? " (the others' median: " : " (the other: ") + step_and_wait(s.others, false) + ")";
    // Some rank is always slowest by a hair: say when that is all it is.
    if (!s.holds_back) o += ", not enough to hold the others back";
  } else {
    o += "n/a (" + s.why + ")";
  }
  // The unhidden NCCL shares, where any rank measured one (--busy): the waiting made visible.
  const bool nccl = std::any_of(ranks.begin(), ranks.end(), [](const RankFigures& f) { return f.nccl_exposed_share.has_value(); });
  if (!nccl) return o;
  o += "; NCCL not hidden:";
  for (size_t k = 0; k < ranks.size(); ++k)
    o += (k ? ", rank " : " rank ") + std::to_string(ranks[k].rank) + " " + pct_or_na(ranks[k].nccl_exposed_share);
  return o;
}

}  // namespace loupe::instrument
