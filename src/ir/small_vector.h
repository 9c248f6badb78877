// A vector that keeps up to N elements in place and moves to the heap beyond:
// for the few dims or operands a kernel plans per call (a broadcast's rows,
// a node's input pointers), so that a run at small shapes allocates nothing
// for its bookkeeping. Trivially copyable element types only.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace tessera {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable elements");

 public:
  SmallVector() = default;
  SmallVector(size_t n, const T& value) { assign(n, value); }
  SmallVector(const SmallVector& other) { *this = other; }
  SmallVector& operator=(const SmallVector& other) {
    if (this == &other) return *this;
    resize(other.size_);
    std::copy(other.data(), other.data() + other.size_, data());
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_.data() : inline_.data(); }
  const T* data() const { return size_ > N ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

  void assign(size_t n, const T& value) {
    resize(n);
    std::fill(data(), data() + n, value);
  }
  void push_back(const T& value) {
    resize(size_ + 1);
    back() = value;
  }
  /// New elements are unspecified; kept ones stay.
  void resize(size_t n) {
    if (n > N && size_ <= N) {
      heap_.resize(n);
      std::copy(inline_.data(), inline_.data() + size_, heap_.data());
    } else if (n > N) {
      heap_.resize(n);
    } else if (size_ > N) {
      std::copy(heap_.data(), heap_.data() + n, inline_.data());
    }
    size_ = n;
  }
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t size_ = 0;
};

}  // namespace tessera
