#include "instrument/predict.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/text.h"
#include "instrument/json_out.h"

namespace loupe::instrument {

namespace {
struct Least {
  double seconds = 0;
  const char* bound = "kept";
};

Least least_time(const ProfileRow& r, const GpuSheet& g, Precision precision, double floor) {
  const double compute = r.flops / (g.tflops(precision) * 1e12), memory = r.bytes / (g.gbs * 1e9);
  const double latency = r.kernels * floor;
  Least l;
  if (compute > l.seconds) l = {compute, "compute"};
  if (memory > l.seconds) l = {memory, "memory"};
  if (latency > l.seconds) l = {latency, "latency"};
  return l;
}

// The shortest mean kernel time among the rows: what a kernel costs with (almost) no work.
double kernel_floor(const Profile& p) {
  double floor = 0;
  for (const ProfileRow& r : p.rows)
    if (r.kernels > 0 && r.busy_seconds > 0) {
      const double each = r.busy_seconds / r.kernels;
      if (floor == 0 || each < floor) floor = each;
    }
  return floor;
}
}  // namespace

Prediction predict(const Profile& p, const GpuSheet& from, const GpuSheet& to, Precision precision) {
  LOUPE_CHECK(p.gpu, "a prediction for another GPU needs a profile measured on a GPU");
  LOUPE_CHECK(from.gbs > 0 && to.gbs > 0 && from.tflops(precision) > 0 && to.tflops(precision) > 0,
              "a prediction needs both GPUs' peaks and bandwidths");
  Prediction pr;
  pr.from = from.label;
  pr.to = to.label;
  pr.precision = precision;
  pr.floor = kernel_floor(p);
  for (const ProfileRow& r : p.rows) {
    const Least here = least_time(r, from, precision, pr.floor), there = least_time(r, to, precision, pr.floor);
    PredictedRow row{r.module.empty() ? r.op + " " + r.phase : r.module + " " + r.op + " " + r.phase, r.busy_seconds,
                     r.busy_seconds, "kept"};
    if (here.seconds > 0) {
      // The time above the least is the row's own (tails, waits, uncoalesced access): kept. A row
      // faster than its least read its counted bytes from a cache: scaled instead.
      const double over = r.busy_seconds - here.seconds;
      row.to = over >= 0 ? there.seconds + over : r.busy_seconds * there.seconds / here.seconds;
      row.bound = there.bound;
    }
    pr.busy_from += row.from;
    pr.busy_to += row.to;
    pr.rows.push_back(std::move(row));
  }
  pr.idle = std::max(0.0, p.wall - p.busy);
  pr.step_from = p.wall;
  pr.step_to = pr.busy_to + pr.idle;
  return pr;
}

std::string prediction_text(const Prediction& pr, size_t max_rows) {
  std::string out = printed(
      "predicted on %s: %.1f us per step against %.1f us measured on this %s, %.2fx its speed (%s; busy "
      "%.1f -> %.1f us, the %.1f us of gaps kept; a kernel's floor %.2f us)\n",
      pr.to.c_str(), pr.step_to * 1e6, pr.step_from * 1e6, pr.from.c_str(),
      pr.step_to > 0 ? pr.step_from / pr.step_to : 0.0, precision_name(pr.precision), pr.busy_from * 1e6,
      pr.busy_to * 1e6, pr.idle * 1e6, pr.floor * 1e6);
  std::vector<const PredictedRow*> moved;
  for (const PredictedRow& r : pr.rows)
    if (std::fabs(r.to - r.from) > 0) moved.push_back(&r);
  std::stable_sort(moved.begin(), moved.end(), [](const PredictedRow* a, const PredictedRow* b) {
    return std::fabs(a->to - a->from) > std::fabs(b->to - b->from);
  });
  for (size_t i = 0; i < moved.size() && i < max_rows; ++i)
    out += printed("  %-52s %8.1f -> %8.1f us  (%s-bound there)\n", moved[i]->name.substr(0, 52).c_str(),
                   moved[i]->from * 1e6, moved[i]->to * 1e6, moved[i]->bound.c_str());
  if (moved.empty()) out += "  no row moves: every one is bound by what both GPUs share\n";
  return out;
}

namespace {
using Json = nlohmann::json;

double field_number(const Json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
    throw Error(std::string("not a loupe profile: ") + where + " has no non-negative number '" + key + "'");
  return it->get<double>();
}

std::string text_field(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
}  // namespace

Profile profile_from_json(const std::string& text) {
  // Values nested deeper than a row's fields are checked by the parser but not kept: a hostile
  // file of a million nested brackets costs no more memory than its text.
  const Json::parser_callback_t shallow = [](int depth, Json::parse_event_t, Json&) { return depth <= 3; };
  Json j;
  try {
    j = Json::parse(text, shallow);
  } catch (const Json::exception& e) {  // a syntax error, or a number past double's range (1e999)
    const std::string what = e.what();
    throw Error("not a loupe profile: " + what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2));
  }
  if (!j.is_object()) throw Error("not a loupe profile: the text is not a JSON object");
  Profile p;
  p.steps = int64_t(std::min(field_number(j, "steps", "the profile"), 1e18));
  auto gpu = j.find("gpu");
  p.gpu = gpu != j.end() && gpu->is_boolean() && gpu->get<bool>();
  p.device = text_field(j, "device");
  const std::string prec = text_field(j, "precision");
  for (Precision q : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16})
    if (prec == precision_name(q)) p.ceilings.precision = q;
  if (!prec.empty() && prec != precision_name(p.ceilings.precision))
    throw Error("not a loupe profile: its precision '" + prec + "' is none of fp32, tf32, fp16 and bf16");
  p.wall = field_number(j, "wall_us_per_step", "the profile") * 1e-6;
  p.busy = field_number(j, "busy_us_per_step", "the profile") * 1e-6;
  p.idle = field_number(j, "idle_us_per_step", "the profile") * 1e-6;
  p.boundary = field_number(j, "boundary_us_per_step", "the profile") * 1e-6;
  auto rows = j.find("rows");
  if (rows == j.end() || !rows->is_array()) throw Error("not a loupe profile: no 'rows' array");
  for (const Json& r : *rows) {
    if (!r.is_object()) throw Error("not a loupe profile: a row is not an object");
    ProfileRow row;
    row.module = text_field(r, "module");
    row.op = text_field(r, "op");
    row.phase = text_field(r, "phase");
    row.kernels = field_number(r, "kernels_per_step", "a row");
    row.busy_seconds = field_number(r, "busy_us_per_step", "a row") * 1e-6;
    row.seconds = field_number(r, "us_per_step", "a row") * 1e-6;
    row.flops = field_number(r, "flops_per_step", "a row");
    row.bytes = field_number(r, "bytes_per_step", "a row");
    p.rows.push_back(std::move(row));
  }
  return p;
}

}  // namespace loupe::instrument
