// The CPU's fast INT4 kernel for group-quantized weights (AWQ / GPTQ / compressed-tensors W4A16,
// backends/int_weights.h; llama.cpp's Q4_0 x Q8_0 idea): the U4 codes stay as the checkpoint's
// canonical layout (two per byte, the even k in the low nibble), the activations are quantized per
// row and 32-element block to INT8 at run time (cpu_int8_kernels.h's quantize_q8_row, the
// --cpu-precision fast path: a rounding of the same size as BF16's), so every product is an integer
// one and the zero point folds in exactly:
//   sum_k xq_k (q_k - z) = sum_k xq_k q_k - z sum_k xq_k.
// The recipe every variant follows, bit for bit (tests compare them): K is taken 128 at a time (a
// chunk), in 16 lanes of 8 elements; lane l of chunk c covers k in [128c + 8l, 128c + 8l + 8), so
// it lies inside one activation block (32) and one weight group (G % 32 == 0), and adds
//   acc[l] = fma(float(d_l - z_g * s_l), xs_b * ws_g, acc[l])
// (d_l = the lane's integer products, s_l = the lane's sum of activation codes); the 16 lanes are
// summed 8 + 8, 4 + 4, 2 + 2, 1 + 1. The activations are stored per chunk as its 64 even elements
// then its 64 odd ones, so the 64 code bytes of a chunk split into low nibbles (even k) and high
// nibbles (odd k) that meet them lane for lane without a shuffle.
// Requirements (else the caller takes the exact path): U4 codes, K % 32 == 0, G in {32, 64} or a
// multiple of 128 (the lane -> group pattern is then the same in every chunk), integral zero points
// in [0, 255], read as bytes (q4_zero_points: once at load, CpuBackend::prepare_int_weight).
#pragma once
#include <cstdint>
#include <vector>

namespace nanovllm::cpu {

constexpr int64_t kQ4Chunk = 128;  // elements per chunk of 16 lanes

// Whether the fast kernel takes this shape (U4 codes assumed): K % 32 == 0 and G as above.
bool q4_kernel_fits(int64_t K, int64_t G);

// One row of activations, quantized and laid out for gemm_q4.
struct Q4Activations {
  int64_t K = 0, chunks = 0;  // chunks = ceil(K / 128)
  std::vector<int8_t> codes;  // [chunks * 128]: per chunk its even elements then its odd ones (zero-padded)
  std::vector<float> scale;   // [chunks * 16]: lane l's activation block scale (0 past K)
  std::vector<int32_t> sums;  // [chunks * 16]: lane l's sum of codes
};
// The F32 zero points z[0..n) as the kernel's bytes: false (out untouched past the first misfit)
// unless every one is an integer in [0, 255].
bool q4_zero_points(const float* z, int64_t n, uint8_t* out);

// x[0..K) -> a (resized as needed).
void quantize_q4_activations(const float* x, int64_t K, Q4Activations& a);

// out[t * ldo + n] for t < T, n in [n0, n1): T activation rows against rows of the canonical U4
// codes [N, K] (row n at codes + n * K / 2) with F32 scale [N, K / G] and U8 zero points [N, K / G]
// (q4_zero_points; null: the midpoint 8). vnni: the AVX-512 VNNI variant (refused where the CPU lacks it), else
// portable.
void gemm_q4(const Q4Activations* x, int64_t T, const uint8_t* codes, const float* scale, const uint8_t* zero,
             int64_t K, int64_t G, int64_t n0, int64_t n1, float* out, int64_t ldo, bool vnni);

}  // namespace nanovllm::cpu
