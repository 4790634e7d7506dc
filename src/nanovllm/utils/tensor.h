// A minimal contiguous tensor: shared storage (host or device memory) + dtype + shape.
// Views (reshape, row slices) share the storage. Device memory is allocated by a Backend;
// Tensor::host() allocates 64-byte aligned, zero-filled host memory.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/utils/dtype.h"

namespace nanovllm {

enum class Device : uint8_t { CPU, CUDA };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);

// Owns one allocation; `release` frees it (free, cudaFree, ...).
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::CPU;
  std::function<void(void*)> release;
  ~Buffer() {
    if (ptr && release) release(ptr);
  }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Buffer> buf, DType dtype, Shape shape, size_t offset = 0);

  static Tensor host(const Shape& shape, DType dtype);  // zero-filled

  bool defined() const { return buf_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return buf_ ? buf_->device : Device::CPU; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return int64_t(shape_.size()); }
  int64_t size(int64_t i) const { return shape_.at(size_t(i < 0 ? i + dim() : i)); }
  int64_t numel() const;
  size_t nbytes() const { return dtype_bytes(dtype_, size_t(numel())); }

  void* raw() const { return static_cast<char*>(buf_->ptr) + offset_; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  Tensor view(const Shape& shape) const;          // same numel, shares storage
  Tensor rows(int64_t begin, int64_t end) const;  // slice of the first dimension

 private:
  std::shared_ptr<Buffer> buf_;
  DType dtype_ = DType::F32;
  Shape shape_;
  size_t offset_ = 0;
};

}  // namespace nanovllm
