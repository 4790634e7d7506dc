// The CPU's fast-path kernels over BF16 weights: FP32 activations times BF16 weights widened to
// FP32 (exact products), accumulated in FP32. Each has an AVX-512, an AVX2+FMA and a portable
// variant, chosen once at run time by the CPU's features (the binary is built for baseline x86-64;
// the vector variants carry their own target attributes). Single-threaded: callers split rows.
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

// Avx512Bf16: AVX-512 with the BF16 dot product (vdpbf16ps: Zen 4, Cooper Lake, Sapphire Rapids).
enum class Isa { Portable, Avx2, Avx512, Avx512Bf16 };
Isa detected_isa();  // what this CPU runs (cached)
const char* isa_name(Isa isa);

// out[t * ldo + n] = sum_k x[t * ldx + k] * w[n * K + k] for t < T and n in [n0, n1): T rows of
// activations against rows n0..n1 of a [N, K] BF16 matrix (each weight row read once per 4 rows
// of x). `isa` picks the variant (tests compare them); a variant the CPU lacks is refused.
void gemv_bf16(const float* x, int64_t ldx, int64_t T, const uint16_t* w, int64_t K, int64_t n0, int64_t n1, float* out,
               int64_t ldo, Isa isa = detected_isa());

// A GEMM with vdpbf16ps (detected_isa() == Avx512Bf16; refused otherwise): the same sums with x
// rounded to BF16 first (xb: [T, ldx] BF16, see round_to_bf16), products summed pairwise in FP32.
// K must be even. Twice the multiply-adds per instruction of gemv_bf16, yet not used by linear: on
// the dev VM vdpbf16ps issues at a quarter of the FP32 FMA rate (cpu_linear.cpp).
void gemm_bf16_dp(const uint16_t* xb, int64_t ldx, int64_t T, const uint16_t* w, int64_t K, int64_t n0, int64_t n1,
                  float* out, int64_t ldo);

// dst[i] = f32_to_bf16(src[i]) (round to nearest even, bit for bit) for n values.
void round_to_bf16(const float* src, int64_t n, uint16_t* dst);

// dst[i] = float(src[i]) for n BF16 values.
void widen_bf16(const uint16_t* src, int64_t n, float* dst, Isa isa = detected_isa());

}  // namespace nanovllm::cpu
