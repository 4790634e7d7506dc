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
// The two above for two queries over the same rows, each query's results those of its own call
// bit for bit (the rows loaded once: prefill attention pairs a head's consecutive queries).
void dots2_f32(const float* q0, const float* q1, const float* const* rows, int64_t count, int64_t n, float* out0,
               float* out1);
void weighted_sum2_f32(const float* p0, const float* p1, const float* const* rows, int64_t count, int64_t n, float* y0,
                       float* y1);

// scores[j] <- softmax(scores * scale)[j] over n values: the max subtracted, std::exp, the sum in
// double and a division per value (the exact path's, the oracle of the CUDA kernels).
void softmax_exact(float* scores, int64_t n, float scale);
// The same with a vector exp (Cody-Waite reduction and a degree-6 polynomial, within 2 ulp of
// expf), an FP32 sum in 16 lanes and a multiply by its inverse: the fast path's (CpuPrecision::Fast),
// ~10x fewer cycles than softmax_exact. Without AVX-512: softmax_exact.
void softmax_fast(float* scores, int64_t n, float scale);

}  // namespace nanovllm::cpu
