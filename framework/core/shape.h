// Shape: a small fixed-capacity list of sizes (no heap allocation per tensor).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace loupe {

constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  explicit Shape(const std::vector<int64_t>& d);
  int size() const { return n_; }                 // number of dimensions
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t numel() const;
  void push_back(int64_t v);
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[128, 784]"

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

// "[2, 3]", as Shape::str writes it, for any list of dimensions: one read from a file too (a Shape
// refuses a bad one with a sentence that does not name the file).
std::string dims_text(const std::vector<int64_t>& d);
// Row-major strides of a contiguous tensor of this shape.
Shape contiguous_strides(const Shape& s);
// Normalises a possibly negative dimension index; throws if out of range.
int wrap_dim(int dim, int ndim);
// The NumPy broadcast of two shapes; throws with both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace loupe
