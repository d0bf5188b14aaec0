#include "instrument/scaling.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "instrument/compare.h"
#include "instrument/flat_json.h"
#include "instrument/json_out.h"
#include "instrument/report_io.h"

namespace loupe::instrument {

namespace {
// Each field's values by epoch, rank 0's records only (a one-GPU run's have no rank).
using ByEpoch = std::map<std::string, std::map<int, double>>;

std::optional<double> steady(const std::map<int, double>& per_epoch) {
  if (per_epoch.empty()) return std::nullopt;
  std::vector<double> later;
  for (const auto& [e, v] : per_epoch)
    if (e >= 2) later.push_back(v);
  return later.empty() ? std::optional<double>(per_epoch.rbegin()->second) : median(later);
}
}  // namespace

WorldFigures world_figures(const std::string& jsonl, int gpus) {
  WorldFigures f;
  ByEpoch by;
  std::istringstream in(jsonl);
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    std::string err;
    std::optional<FlatRecord> r = parse_flat_json(line, &err);
    if (!r || !number_of(*r, "epoch") || number_of(*r, "rank").value_or(0) != 0) continue;
    ++records;
    const int epoch = int(*number_of(*r, "epoch"));
    if (int(number_of(*r, "world_size").value_or(1)) != gpus) {
      f.why = "the records are of a world of " + std::to_string(int(number_of(*r, "world_size").value_or(1))) +
              ", not " + std::to_string(gpus);
      return f;
    }
    const char* sps = gpus > 1 ? "world_samples_per_sec" : "samples_per_sec";
    for (const char* key : {sps, "nccl_share", "nccl_exposed_share", "bus_gbps"})
      if (std::optional<double> v = number_of(*r, key)) by[key == sps ? "sps" : key][epoch] = *v;
  }
  f.samples_per_sec = steady(by["sps"]);
  f.nccl_share = steady(by["nccl_share"]);
  f.nccl_exposed_share = steady(by["nccl_exposed_share"]);
  f.bus_gbps = steady(by["bus_gbps"]);
  if (!f.samples_per_sec) f.why = records ? "no samples/s in the records" : "no records";
  return f;
}

std::optional<double> scaling_efficiency(const std::vector<WorldRow>& rows, size_t i) {
  const WorldRow* base = nullptr;
  for (const WorldRow& r : rows)
    if (r.f.samples_per_sec && (!base || r.gpus < base->gpus)) base = &r;
  const WorldRow& r = rows[i];
  if (!base || !r.f.samples_per_sec || *base->f.samples_per_sec <= 0) return std::nullopt;
  return *r.f.samples_per_sec * base->gpus / (r.gpus * *base->f.samples_per_sec);
}

std::string world_table(const std::vector<WorldRow>& rows) {
  auto pct = [](std::optional<double> v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", 100 * v.value_or(0));
    return v ? std::string(b) : std::string("n/a");
  };
  char buf[256];
  std::snprintf(buf, sizeof buf, "%5s %14s %12s %9s %19s %9s\n", "gpus", "samples/s", "per GPU", "scaling",
                "comm (not hidden)", "bus GB/s");
  std::string out = buf;
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorldRow& r = rows[i];
    const WorldFigures& f = r.f;
    const std::string sps = f.samples_per_sec ? thousands(*f.samples_per_sec) : "n/a";
    const std::string per = f.samples_per_sec ? thousands(*f.samples_per_sec / r.gpus) : "n/a";
    std::string nccl = "-", bus = "-";
    if (r.gpus > 1) {
      nccl = f.nccl_share ? pct(f.nccl_share) + " (" + pct(f.nccl_exposed_share) + ")" : "n/a";
      if (f.bus_gbps) {
        std::snprintf(buf, sizeof buf, "%.1f", *f.bus_gbps);
        bus = buf;
      } else {
        bus = "n/a";
      }
    }
    std::snprintf(buf, sizeof buf, "%5d %14s %12s %9s %19s %9s", r.gpus, sps.c_str(), per.c_str(),
                  pct(scaling_efficiency(rows, i)).c_str(), nccl.c_str(), bus.c_str());
    out += buf;
    if (!f.samples_per_sec) out += "  (" + f.why + ")";
    out += "\n";
  }
  return out;
}

namespace {
std::string number_cell(std::optional<double> v) {
  if (!v) return "";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", *v);
  return b;
}

}  // namespace

const char* const kScalingCsvHeader = "model,batch,precision,gpus,samples_per_sec,samples_per_sec_per_gpu,"
                                      "scaling_efficiency,nccl_share,nccl_exposed_share,bus_gbps\n";

void add_scaling_rows(const std::string& model, int64_t batch, const std::string& precision,
                      const std::vector<WorldRow>& rows, std::string& csv, std::string& json) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorldFigures& f = rows[i].f;
    const std::optional<double> per =
        f.samples_per_sec ? std::optional<double>(*f.samples_per_sec / rows[i].gpus) : std::nullopt;
    const std::optional<double> v[] = {f.samples_per_sec, per, scaling_efficiency(rows, i), f.nccl_share,
                                       f.nccl_exposed_share, f.bus_gbps};
    const char* names[] = {"samples_per_sec", "samples_per_sec_per_gpu", "scaling_efficiency", "nccl_share",
                           "nccl_exposed_share", "bus_gbps"};
    csv += model + "," + std::to_string(batch) + "," + precision + "," + std::to_string(rows[i].gpus);
    nlohmann::ordered_json j{{"model", model}, {"batch", batch}, {"precision", precision}, {"gpus", rows[i].gpus}};
    for (size_t k = 0; k < 6; ++k) {
      csv += "," + number_cell(v[k]);
      j[names[k]] = v[k] ? json_number(*v[k]) : nlohmann::ordered_json(nullptr);
    }
    csv += "\n";
    json += json_text(j) + "\n";
  }
}

}  // namespace loupe::instrument
