#include "core/shape.h"

#include "core/error.h"

namespace loupe {

Shape::Shape(std::initializer_list<int64_t> d) {
  for (int64_t v : d) push_back(v);
}
Shape::Shape(const std::vector<int64_t>& d) {
  for (int64_t v : d) push_back(v);
}

void Shape::push_back(int64_t v) {
  LOUPE_CHECK(n_ < kMaxDims, "tensors have at most ", kMaxDims, " dimensions");
  LOUPE_CHECK(v >= 0, "negative size ", v, " in a shape");
  d_[n_++] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i) n *= d_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[i] != o.d_[i]) return false;
  return true;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Shape::str() const { return dims_text(vec()); }

Shape contiguous_strides(const Shape& s) {
  Shape st = s;
  int64_t acc = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

int wrap_dim(int dim, int ndim) {
  int d = dim < 0 ? dim + ndim : dim;
  LOUPE_CHECK(d >= 0 && d < ndim, "dimension ", dim, " is out of range for a ", ndim, "-D tensor");
  return d;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  int n = a.size() > b.size() ? a.size() : b.size();
  Shape out;
  for (int i = 0; i < n; ++i) {
    int ia = i - (n - a.size()), ib = i - (n - b.size());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    LOUPE_CHECK(da == db || da == 1 || db == 1, "shapes ", a.str(), " and ", b.str(), " do not broadcast");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

}  // namespace loupe
