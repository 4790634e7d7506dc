// Sizes from model files multiplied without overflow: a product that does not fit in int64
// is reported as such instead of wrapping around (and passing a later size check by chance).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace nanovllm {

// a * b for non-negative a and b; nullopt when it does not fit in int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a + b for non-negative a and b; nullopt when it does not fit in int64.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of the dimensions (1 for a scalar); nullopt on a negative one or on overflow.
inline std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    auto r = checked_mul(n, d);
    if (!r) return std::nullopt;
    n = *r;
  }
  return n;
}

}  // namespace nanovllm
