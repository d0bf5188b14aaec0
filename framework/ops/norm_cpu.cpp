#include <cmath>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/norm.h"

namespace loupe {
namespace {

// Calls f(value pointer, count) for each of channel c's N contiguous runs of HW values.
template <class T, class F>
void channel(const T* x, int64_t N, int64_t C, int64_t HW, int64_t c, F&& f) {
  for (int64_t n = 0; n < N; ++n) f(x + (n * C + c) * HW, n);
}

void forward_train(const ExecContext&, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                   const Tensor& rmean, const Tensor& rvar, const Tensor& save_mean, const Tensor& save_invstd,
                   double momentum, double eps, int64_t N, int64_t C, int64_t HW) {
  cpu::dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double sum = 0, sq = 0, m = double(N * HW);
        channel(x.data<T>(), N, C, HW, c, [&](const T* p, int64_t) {
          for (int64_t i = 0; i < HW; ++i) sum += p[i];
        });
        double mean = sum / m;
        channel(x.data<T>(), N, C, HW, c, [&](const T* p, int64_t) {
          for (int64_t i = 0; i < HW; ++i) sq += (p[i] - mean) * (p[i] - mean);
        });
        double var = sq / m, invstd = 1.0 / std::sqrt(var + eps);
        T scale = T(double(w.data<T>()[c]) * invstd), shift = T(double(b.data<T>()[c]) - mean * double(scale));
        channel(x.data<T>(), N, C, HW, c, [&](const T* p, int64_t n) {
          T* q = y.data<T>() + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) q[i] = p[i] * scale + shift;
        });
        save_mean.data<T>()[c] = T(mean);
        save_invstd.data<T>()[c] = T(invstd);
        rmean.data<T>()[c] = T((1 - momentum) * double(rmean.data<T>()[c]) + momentum * mean);
        rvar.data<T>()[c] = T((1 - momentum) * double(rvar.data<T>()[c]) + momentum * sq / (m - 1));
      }
    });
  });
}

void forward_eval(const ExecContext&, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                  const Tensor& rmean, const Tensor& rvar, double eps, int64_t N, int64_t C, int64_t HW) {
  cpu::dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t c = 0; c < C; ++c) {
      double invstd = 1.0 / std::sqrt(double(rvar.data<T>()[c]) + eps);
      T scale = T(double(w.data<T>()[c]) * invstd);
      T shift = T(double(b.data<T>()[c]) - double(rmean.data<T>()[c]) * double(scale));
      channel(x.data<T>(), N, C, HW, c, [&](const T* p, int64_t n) {
        T* q = y.data<T>() + (n * C + c) * HW;
        for (int64_t i = 0; i < HW; ++i) q[i] = p[i] * scale + shift;
      });
    }
  });
}

// gx = w invstd (gy - mean(gy) - xhat mean(gy xhat)); gw = sum(gy xhat); gb = sum(gy).
void norm_backward(const ExecContext&, const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& x,
                   const Tensor& w, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& gy, double, int64_t N,
                   int64_t C, int64_t HW) {
  cpu::dispatch_floating(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double mean = save_mean.data<T>()[c], invstd = save_invstd.data<T>()[c], m = double(N * HW);
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* xp = x.data<T>() + (n * C + c) * HW;
          const T* gp = gy.data<T>() + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) {
            sg += gp[i];
            sgx += gp[i] * (xp[i] - mean) * invstd;
          }
        }
        gw.data<T>()[c] = T(sgx);
        gb.data<T>()[c] = T(sg);
        double k = double(w.data<T>()[c]) * invstd;
        for (int64_t n = 0; n < N; ++n) {
          const T* xp = x.data<T>() + (n * C + c) * HW;
          const T* gp = gy.data<T>() + (n * C + c) * HW;
          T* q = gx.data<T>() + (n * C + c) * HW;
          for (int64_t i = 0; i < HW; ++i) {
            double xhat = (xp[i] - mean) * invstd;
            q[i] = T(k * (gp[i] - sg / m - xhat * sgx / m));
          }
        }
      }
    });
  });
}

const NormKernels table{forward_train, forward_eval, norm_backward};
const RegisterBackend<NormKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
