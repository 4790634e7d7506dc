// FP32 vector helpers of the CPU attention (cpu_attention.cpp): AVX-512 where the CPU has it
// (cpu_bf16_kernels.h's detection), else portable loops with four partial sums.
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

float dot_f32(const float* a, const float* b, int64_t n);     // sum a[i] * b[i]
void axpy_f32(float a, const float* x, float* y, int64_t n);  // y[i] += a * x[i]

// out[j] = sum_i q[i] * rows[j][i] for j < count: four rows in flight and reduced together (each
// row's sum is formed the same way wherever it falls; not bit-equal to dot_f32).
void dots_f32(const float* q, const float* const* rows, int64_t count, int64_t n, float* out);
// y[i] += p[j] * rows[j][i] for j = 0..count-1 in order (count axpy_f32 calls' sums, y kept in
// registers over the rows).
void weighted_sum_f32(const float* p, const float* const* rows, int64_t count, int64_t n, float* y);

}  // namespace nanovllm::cpu
