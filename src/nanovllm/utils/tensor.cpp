#include "nanovllm/utils/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "nanovllm/utils/error.h"

namespace nanovllm {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor::Tensor(std::shared_ptr<Buffer> buf, DType dtype, Shape shape, size_t offset)
    : buf_(std::move(buf)), dtype_(dtype), shape_(std::move(shape)), offset_(offset) {
  if (buf_ && offset_ + nbytes() > buf_->bytes)
    throw Error("tensor view " + shape_str(shape_) + " exceeds its buffer of " + std::to_string(buf_->bytes) +
                " bytes");
}

Tensor Tensor::host(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  size_t bytes = dtype_bytes(dtype, size_t(n));
  auto buf = std::make_shared<Buffer>();
  buf->bytes = bytes;
  buf->device = Device::CPU;
  if (bytes >= (size_t(1) << 20)) {
    // Large (weights, KV cache): anonymous pages are zero and only cost when first touched.
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw ResourceError("out of host memory allocating " + std::to_string(bytes) + " bytes");
    buf->ptr = p;
    buf->release = [bytes](void* q) { ::munmap(q, bytes); };
  } else {
    size_t alloc = (bytes + 63) / 64 * 64;
    buf->ptr = std::aligned_alloc(64, alloc ? alloc : 64);
    if (!buf->ptr) throw ResourceError("out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(buf->ptr, 0, alloc);
    buf->release = [](void* q) { std::free(q); };
  }
  return Tensor(std::move(buf), dtype, shape);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

Tensor Tensor::view(const Shape& shape) const {
  Tensor t = *this;
  t.shape_ = shape;
  if (t.numel() != numel()) throw Error("cannot view tensor of shape " + shape_str(shape_) + " as " + shape_str(shape));
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (dim() == 0 || begin < 0 || end < begin || end > shape_[0])
    throw Error("row slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of range for shape " +
                shape_str(shape_));
  Tensor t = *this;
  int64_t row = numel() / (shape_[0] ? shape_[0] : 1);
  t.shape_[0] = end - begin;
  t.offset_ = offset_ + dtype_bytes(dtype_, size_t(begin * row));  // U4: rows of an even length
  return t;
}

}  // namespace nanovllm
