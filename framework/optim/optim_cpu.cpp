#include <atomic>
#include <cmath>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "optim/optimizer.h"

namespace loupe::optim {
namespace {

constexpr int64_t kGrain = 65536;

// With a GradScaler, a step whose gradients overflowed leaves everything untouched.
bool skipped(const UpdateArgs& a) { return a.scaler && a.scaler[kFoundInf] != 0.f; }

// With a GradScaler, the gradients are still scaled: each is multiplied by 1 / scale as it is read
// (the one place the division happens; optim/grad_scaler.h).
float inv_scale(const UpdateArgs& a) { return a.scaler ? 1.f / a.scaler[kScale] : 1.f; }

// The update's learning rate: the curve at the updates issued before it, from the base rate
// (optim/lr_curve.h; the count is there whenever the curve is not constant).
float lr_of(const UpdateArgs& a) { return float(curve_rate(a.curve, *a.lr, a.count ? *a.count : 0.0)); }

void sgd(const ExecContext&, const Tensor& p, const Tensor& g, const Tensor& buf, const UpdateArgs& a, float momentum,
         bool nesterov, float wd) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pb = buf.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      float gi = pg[i] * inv + wd * pp[i];
      if (momentum != 0.f) {
        pb[i] = momentum * pb[i] + gi;
        gi = nesterov ? gi + momentum * pb[i] : pb[i];
      }
      pp[i] -= lr * gi;
    }
  });
}

void rmsprop(const ExecContext&, const Tensor& p, const Tensor& g, const Tensor& v, const UpdateArgs& a, float rho,
             float eps) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pv = v.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      const float gi = pg[i] * inv;
      pv[i] = rho * pv[i] + (1.f - rho) * gi * gi;
      pp[i] -= lr * gi / (std::sqrt(pv[i]) + eps);
    }
  });
}

void adam(const ExecContext&, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const UpdateArgs& a,
          double beta1, double beta2, float eps, float wd) {
  if (skipped(a)) return;
  // t: the updates applied so far, this one included (a GradScaler's skipped steps do not count).
  double t = *a.count + 1.0 - (a.scaler ? double(a.scaler[kSkipped]) : 0.0);
  const float lr = lr_of(a), b1 = float(beta1), b2 = float(beta2), inv = inv_scale(a);
  const float bias1 = float(1.0 - std::pow(beta1, t)), bias2 = float(1.0 - std::pow(beta2, t));
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      const float gi = pg[i] * inv;
      pm[i] = b1 * pm[i] + (1.f - b1) * gi;
      pv[i] = b2 * pv[i] + (1.f - b2) * gi * gi;
      float mhat = pm[i] / bias1, vhat = pv[i] / bias2;
      pp[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * pp[i]);
    }
  });
}

void adadelta(const ExecContext&, const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta,
              const UpdateArgs& a, float rho, float eps) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  float* pp = p.data<float>();
  const float* pg = g.data<float>();
  float* pa = acc.data<float>();
  float* pd = delta.data<float>();
  parallel_for(0, p.numel(), kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      const float gi = pg[i] * inv;
      pa[i] = rho * pa[i] + (1.f - rho) * gi * gi;
      float u = gi * std::sqrt(pd[i] + eps) / std::sqrt(pa[i] + eps);
      pd[i] = rho * pd[i] + (1.f - rho) * u * u;
      pp[i] -= lr * u;
    }
  });
}

void count(const ExecContext&, const Tensor& c) { *c.data<double>() += 1.0; }

// GradScaler's pass: read-only, it only raises found_inf.
void check(const ExecContext&, const Tensor& grads, const Tensor& state) {
  const float* g = grads.data<float>();
  std::atomic<bool> bad{false};
  parallel_for(0, grads.numel(), kGrain, [&](int64_t b, int64_t e) {
    bool local = false;
    for (int64_t i = b; i < e; ++i) local |= !std::isfinite(g[i]);
    if (local) bad = true;
  });
  if (bad) state.data<float>()[kFoundInf] = 1.f;
}

void update(const ExecContext&, const Tensor& state, float growth, float backoff, int interval) {
  scaler_update(state.data<float>(), growth, backoff, interval);
}

const ScalerKernels scaler_table{check, update};
const RegisterBackend<ScalerKernels> scaler_reg(DeviceType::CPU, &scaler_table);

const OptimKernels table{sgd, rmsprop, adam, adadelta, count};
const RegisterBackend<OptimKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe::optim
