#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/index.h"

namespace loupe {
namespace {

template <class S, class D>
void gather_typed(D* out, const S* src, const int32_t* idx, int64_t n, int64_t rows, int64_t row, double scale,
                  int64_t channels) {
  const int64_t plane = channels > 0 ? row / channels : 0;
  parallel_for(0, n, cpu::kGrain / (row + 1) + 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      int64_t r = idx[i];
      LOUPE_CHECK(r >= 0 && r < rows, "index ", r, " is out of range for ", rows, " rows");
      const S* in = src + r * row;
      D* o = out + i * row;
      if (channels > 0)  // channels-last: element (c, p) of the row at p * channels + c
        for (int64_t j = 0; j < row; ++j) o[(j % plane) * channels + j / plane] = D(double(in[j]) * scale);
      else if (scale == 1.0) for (int64_t j = 0; j < row; ++j) o[j] = D(in[j]);
      else for (int64_t j = 0; j < row; ++j) o[j] = D(double(in[j]) * scale);
    }
  });
}

template <class S>
void gather_from(const Tensor& out, const S* src, const int32_t* idx, int64_t n, int64_t rows, int64_t row,
                 double scale, int64_t channels) {
  switch (out.dtype()) {
    case DType::f32: gather_typed(out.data<float>(), src, idx, n, rows, row, scale, channels); break;
    case DType::f64: gather_typed(out.data<double>(), src, idx, n, rows, row, scale, channels); break;
    case DType::i32: gather_typed(out.data<int32_t>(), src, idx, n, rows, row, scale, channels); break;
    case DType::u8: gather_typed(out.data<uint8_t>(), src, idx, n, rows, row, scale, channels); break;
    default: LOUPE_FAIL("index_select cannot produce ", dtype_name(out.dtype()));
  }
}

void gather(const ExecContext&, const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row,
            double scale, int64_t channels) {
  int64_t rows = src.size(0);
  const int32_t* pi = idx.data<int32_t>();
  switch (src.dtype()) {
    case DType::u8: gather_from(out, src.data<uint8_t>(), pi, n, rows, row, scale, channels); break;
    case DType::i32: gather_from(out, src.data<int32_t>(), pi, n, rows, row, scale, channels); break;
    case DType::f32: gather_from(out, src.data<float>(), pi, n, rows, row, scale, channels); break;
    case DType::f64: gather_from(out, src.data<double>(), pi, n, rows, row, scale, channels); break;
    default: LOUPE_FAIL("index_select cannot read ", dtype_name(src.dtype()));
  }
}

const IndexKernels table{gather};
const RegisterBackend<IndexKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
