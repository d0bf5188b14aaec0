#include <atomic>
#include <cmath>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "optim/optimizer.h"

namespace loupe::optim {
namespace {

constexpr int64_t kGrain = 65536;

// With a GradScaler, a step whose gradients overflowed leaves everything untouched.
bool skipped(const float* scaler) { return scaler && scaler[kFoundInf] != 0.f; }

void sgd(const Tensor& p, const Tensor& g, const Tensor& buf, float lr, float momentum, bool nesterov, float wd,
         const float* scaler) {
  if (skipped(scaler)) return;
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pb = buf.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      float gi = pg[i] + wd * pp[i];
      if (momentum != 0.f) {
        pb[i] = momentum * pb[i] + gi;
        gi = nesterov ? gi + momentum * pb[i] : pb[i];
      }
      pp[i] -= lr * gi;
    }
  });
}

void rmsprop(const Tensor& p, const Tensor& g, const Tensor& v, float lr, float rho, float eps, const float* scaler) {
  if (skipped(scaler)) return;
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pv = v.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      pv[i] = rho * pv[i] + (1.f - rho) * pg[i] * pg[i];
      pp[i] -= lr * pg[i] / (std::sqrt(pv[i]) + eps);
    }
  });
}

void adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamArgs& a, const float* scaler) {
  if (skipped(scaler)) return;
  const float lr = a.lr, b1 = a.beta1, b2 = a.beta2, eps = a.eps, wd = a.weight_decay;
  float bias1 = a.bias1, bias2 = a.bias2;
  if (scaler) {  // count only the steps that were applied
    double t = double(a.step) - double(scaler[kSkipped]);
    bias1 = float(1.0 - std::pow(a.beta1_d, t));
    bias2 = float(1.0 - std::pow(a.beta2_d, t));
  }
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      pm[i] = b1 * pm[i] + (1.f - b1) * pg[i];
      pv[i] = b2 * pv[i] + (1.f - b2) * pg[i] * pg[i];
      float mhat = pm[i] / bias1, vhat = pv[i] / bias2;
      pp[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * pp[i]);
    }
  });
}

void adadelta(const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta, float lr, float rho, float eps,
              const float* scaler) {
  if (skipped(scaler)) return;
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pa = acc.data<float>();
  float* pd = delta.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      pa[i] = rho * pa[i] + (1.f - rho) * pg[i] * pg[i];
      float u = pg[i] * std::sqrt(pd[i] + eps) / std::sqrt(pa[i] + eps);
      pd[i] = rho * pd[i] + (1.f - rho) * u * u;
      pp[i] -= lr * u;
    }
  });
}

void unscale(const Tensor& grads, const Tensor& state) {
  float* g = grads.data<float>();
  float* s = state.data<float>();
  const float inv = 1.f / s[kScale];
  std::atomic<bool> bad{false};
  parallel_for(0, grads.numel(), kGrain, [&](int64_t b, int64_t e) {
    bool local = false;
    for (int64_t i = b; i < e; ++i) {
      local |= !std::isfinite(g[i]);
      g[i] *= inv;
    }
    if (local) bad = true;
  });
  if (bad) s[kFoundInf] = 1.f;
}

void update(const Tensor& state, float growth, float backoff, int interval) {
  scaler_update(state.data<float>(), growth, backoff, interval);
}

const ScalerKernels scaler_table{unscale, update};
const RegisterBackend<ScalerKernels> scaler_reg(DeviceType::CPU, &scaler_table);

const OptimKernels table{sgd, rmsprop, adam, adadelta};
const RegisterBackend<OptimKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe::optim
