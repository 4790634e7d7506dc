// The CPU's INT8 kernels (--quantization int8, llama.cpp's Q8_0 x Q8_0): weights are I8 codes
// w[N, K] with one F32 scale per 32-element block of each row (the last block of a row may be
// short), and activations are quantized the same way per row at run time, so every product is an
// integer one. For out[t][n], the K elements are taken 64 at a time (a chunk c holds blocks 2c and
// 2c + 1) in 16 lanes of 4 elements; lane l of chunk c adds
//   acc[l] = fma(float(sum of its 4 integer products), xs[t][b] * ws[n][b], acc[l]),  b = 2c + l / 8
// and the 16 lanes are summed 8 + 8, 4 + 4, 2 + 2, 1 + 1. The integer sums are exact (|4 products|
// < 2^16) and every variant does these same float operations in this order, so the AVX-512 VNNI,
// AVX2 and portable variants agree bit for bit (tests compare them). Single-threaded: callers split rows.
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

// AVX-512 VNNI: vpdpbusd (4 u8 x s8 products per 32-bit lane; the activations offset by +128 to
// make them unsigned, the weights' 128 x sum subtracted). AVX2: vpmaddubsw on |x| and sign(x) * w.
enum class Int8Isa { Portable, Avx2, Avx512Vnni };
Int8Isa detected_int8_isa();  // what this CPU runs (cached)
const char* int8_isa_name(Int8Isa isa);

constexpr int64_t kQ8Block = 32;  // elements per scale
inline int64_t q8_blocks(int64_t K) { return (K + kQ8Block - 1) / kQ8Block; }

// One row of K floats -> codes[K] and scales[q8_blocks(K)]: per block, scale = amax / 127 and
// code = x / scale rounded to nearest (ties to even); an all-zero block has scale 0 and codes 0.
void quantize_q8_row(const float* x, int64_t K, int8_t* codes, float* scales);

// out[t * ldo + n] for t < T and n in [n0, n1): T quantized rows of activations (xq [T, K] codes,
// xs [T, q8_blocks(K)] scales) against rows n0..n1 of the quantized weights (w [N, K], ws [N,
// q8_blocks(K)]). `isa` picks the variant (tests compare them); a variant the CPU lacks is refused.
void gemm_q8(const int8_t* xq, const float* xs, int64_t T, const int8_t* w, const float* ws, int64_t K, int64_t n0,
             int64_t n1, float* out, int64_t ldo, Int8Isa isa = detected_int8_isa());

}  // namespace nanovllm::cpu
