// FP32 vector helpers of the CPU attention (cpu_attention.cpp): AVX-512 where the CPU has it
// (cpu_bf16_kernels.h's detection), else portable loops with four partial sums.
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

float dot_f32(const float* a, const float* b, int64_t n);     // sum a[i] * b[i]
void axpy_f32(float a, const float* x, float* y, int64_t n);  // y[i] += a * x[i]

}  // namespace nanovllm::cpu
