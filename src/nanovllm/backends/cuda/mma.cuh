// Tensor-core building blocks for sm_80+ (Ampere and Hopper): asynchronous 16-byte copies into
// shared memory (cp.async), ldmatrix loads of 8x8 BF16 tiles and the m16n8k16 BF16 MMA with FP32
// accumulation, as inline PTX. Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"):
// for lane l, g = l / 4 and q = l % 4,
//   A (16x16, row-major):  a0 = A[g][2q..2q+1], a1 = A[g+8][2q..], a2 = A[g][2q+8..], a3 = A[g+8][2q+8..]
//   B (16x8, "col"):       b0 = B[2q..2q+1][g], b1 = B[2q+8..2q+9][g]   (B[k][n]; stored as [n][k] rows)
//   C/D (16x8, FP32):      c0, c1 = C[g][2q], C[g][2q+1];  c2, c3 = C[g+8][2q], C[g+8][2q+1]
// Two adjacent C tiles (n = 16 columns), rounded to BF16 pairs, are exactly an A fragment: the
// trick that keeps flash attention's probabilities in registers between its two products.
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes global -> shared without passing through registers; src_bytes < 16 zero-fills
// the rest (0: the whole 16 bytes are zeros and nothing is read). Bypasses L1 (.cg).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 BF16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i holds it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
// The same, each matrix transposed on the way (rows of the stored matrix become columns).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// d (16x8, FP32) += a (16x16, BF16) * b (16x8, BF16).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to a BF16 pair: lo in the low half (the lower column of a fragment).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const bf162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace nanovllm::cuda
