#include "nn/module.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <sstream>

#include "core/error.h"
#include "core/nvtx.h"
#include "core/precision.h"
#include "nn/arena.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe::nn {

namespace {
thread_local int64_t g_autocasts = 0;
}

int64_t autocasts_16bit() { return g_autocasts; }

Tensor autocast(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::f32 || !t.device().is_cuda()) return t;
  DType c = compute_dtype();
  if (c == DType::f32) return t;
  ++g_autocasts;
  Tensor v = compute_view(t, c);  // a parameter with a compute copy: no cast at all
  if (!v.defined()) return to(t, c);
  return t.requires_grad() ? v : v.detach();
}

std::vector<Tensor> Module::float32_parameters() const {
  std::vector<Tensor> out = own_float32_parameters();
  for (const auto& [name, child] : children_) {
    std::vector<Tensor> c = child->float32_parameters();
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.requires_grad_(true);
  params_.emplace_back(name, t);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, t);
  return buffers_.back().second;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const {
  for (const auto& [n, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + n, t);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out, buffers);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, true);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, false);
  for (auto& [n, t] : out) t.impl()->name = n;
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  const std::function<int64_t(const Module&)> fixed = [&](const Module& m) {
    int64_t f = m.fixed_elements();
    for (const auto& c : m.children_) f += fixed(*c.second);
    return f;
  };
  return n - fixed(*this);
}

void Module::regularize(const std::string& param, double l2) {
  const bool known = std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return p.first == param; });
  LOUPE_CHECK(known, type_name(), " has no parameter '", param, "' to regularize");
  LOUPE_CHECK(std::isfinite(l2) && l2 >= 0, "an l2 regularizer's factor is finite and at least 0, not ", l2);
  l2_.emplace_back(param, l2);
}

Tensor Module::penalty() const {
  Tensor total;
  for (const auto& [key, l2] : l2_) {
    if (l2 == 0) continue;
    const std::string& name = key;  // a lambda may not capture a structured binding (C++17)
    const Tensor& p = std::find_if(params_.begin(), params_.end(), [&](const auto& q) { return q.first == name; })->second;
    const Tensor term = mul(sum(mul(p, p)), l2);
    total = total.defined() ? add(total, term) : term;
  }
  for (const auto& [n, m] : children_) {
    const Tensor c = m->penalty();
    if (c.defined()) total = total.defined() ? add(total, c) : c;
  }
  return total;
}

void Module::set_memory_format(MemoryFormat f) {
  memory_format_ = f;
  for (auto& c : children_) c.second->set_memory_format(f);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::to(Device d) {
  assign_paths("");
  arena_ = std::make_unique<ParameterArena>(parameters(), d);
  for (auto& [n, b] : named_buffers()) {  // rebind in place: the layers hold the same TensorImpl
    if (b.device() == d) continue;
    Tensor moved = loupe::to(b, d);
    b.impl()->storage = moved.impl()->storage;
    b.impl()->offset = moved.impl()->offset;
    b.impl()->strides = moved.impl()->strides;
  }
}

void Module::assign_paths(const std::string& path) {
  std::string type = type_name();
  type = type.substr(0, type.find('('));  // "Linear(784 -> 512)" -> "Linear"
  range_name_ = path.empty() ? type : path + "/" + type;
  for (auto& [n, m] : children_) m->assign_paths(path.empty() ? n : path + "." + n);
}

Tensor Module::operator()(const Tensor& x) {
  if (range_name_.empty()) assign_paths("");
  NvtxRange r(range_name_.c_str(), RangeKind::Module);
  return forward(x);
}

Tensor Module::forward_many(const std::vector<Tensor>& xs) {
  if (xs.size() == 1) return forward(xs[0]);
  LOUPE_FAIL(type_name(), " reads one input, got ", xs.size());
}

Tensor Module::call_many(const std::vector<Tensor>& xs) {
  if (range_name_.empty()) assign_paths("");
  NvtxRange r(range_name_.c_str(), RangeKind::Module);
  return forward_many(xs);
}

std::vector<Tensor> Module::call_outputs(const std::vector<Tensor>& xs) {
  if (range_name_.empty()) assign_paths("");
  NvtxRange r(range_name_.c_str(), RangeKind::Module);
  return forward_outputs(xs);
}

bool fold_epilogue(const Module& layer, const Module& next, Epilogue& e) {
  Epilogue folded = e;
  if (!next.extend(folded) || !layer.accepts(folded)) return false;
  ++folded.absorbed;
  folded.range_name += "+" + next.range_name();
  e = folded;
  return true;
}

Tensor Module::forward_fused(const Tensor&, const Epilogue&) {
  LOUPE_FAIL(type_name(), " has no fused epilogue");
}

Tensor Module::call_fused(const Tensor& x, const Epilogue& e) {
  if (range_name_.empty()) assign_paths("");
  std::string name = range_name_ + e.range_name;
  NvtxRange r(name.c_str(), RangeKind::Module);
  return forward_fused(x, e);
}

ParameterArena& Module::arena() {
  if (!arena_) to(kCPU);
  return *arena_;
}

Device Module::device() const {
  std::vector<Tensor> ps = parameters();
  return ps.empty() ? kCPU : ps[0].device();
}

void Module::summarise(const std::string& prefix, int depth, std::string& out) const {
  int64_t own = 0;
  for (const auto& [n, t] : params_) own += t.numel();
  std::ostringstream line;
  line << std::string(size_t(depth) * 2, ' ') << (prefix.empty() ? "(model)" : prefix) << "  " << type_name();
  if (own) line << "  " << own << " parameters";
  out += line.str() + "\n";
  for (const auto& [n, m] : children_) m->summarise(prefix.empty() ? n : prefix + "." + n, depth + 1, out);
}

std::string Module::summary() const {
  std::string s;
  summarise("", 0, s);
  return s + "total: " + std::to_string(num_parameters()) + " parameters\n";
}

}  // namespace loupe::nn
