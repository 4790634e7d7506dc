// Our own Hopper BF16 GEMM (gemm_wgmma.cu), host side: out[T, N] = x[T, K] @ w[N, K]^T, BF16
// operands and output, FP32 accumulation, as CudaBackend::linear's cuBLASLt GEMM computes it. The
// first step of a GEMM whose epilogue can take the ops cuBLASLt cannot fuse (SiLU-and-mul, the q/k
// norm + RoPE, residual adds); for now a program (bench/gemm_bench.cpp) measures it against
// cuBLASLt and a GPU test checks it, and no op runs it.
#pragma once
#include <cstdint>

namespace nanovllm::cuda {

// The tile forms: CTA tile 128 rows of x x `cols` weight rows, `stages` ring stages of 64
// columns of K, one CTA an SM; one tile a CTA, or persistent CTAs (one wave, each walking tiles
// with its ring running on into the next tile) (gemm_wgmma.cu). Measured against cuBLASLt on an
// H200 (bench/RESULTS.md, 2026-12-01): see gemm_wgmma.cu.
// The persistent 128 x 256 form also with the epilogue through shared memory and TMA stores
// (PersistentTmaStore; needs N % 8 == 0 and out 16-byte aligned). GateUpSilu: that form on a
// gate_up weight, w [2 N][K] (gate rows, then up rows), out [T, N] = silu(x gate^T) * (x up^T)
// rounded as linear + silu_and_mul round it (a tile: 128 outputs, their gate and up rows). Neither
// has run on a GPU yet. kGemmWgmmaForms: the plain forms.
enum class GemmWgmmaForm {
  Cols256Stages4,
  Cols256Stages4Persistent,
  Cols256Stages4PersistentTmaStore,
  Cols128Stages6,
  GateUpSilu
};
inline constexpr GemmWgmmaForm kGemmWgmmaForms[] = {
    GemmWgmmaForm::Cols256Stages4, GemmWgmmaForm::Cols256Stages4Persistent,
    GemmWgmmaForm::Cols256Stages4PersistentTmaStore, GemmWgmmaForm::Cols128Stages6};
const char* gemm_wgmma_form_name(GemmWgmmaForm form);

// Runs the GEMM on `stream` (a cudaStream_t). x, w, out: device BF16, row-major and dense (GateUpSilu:
// w [2 N][K]); T, N >= 1,
// K >= 8 with K % 8 == 0 (the TMA row pitch); the tails of T, N and K are handled (zero-filled
// reads, guarded stores); Error for shapes outside the limits. Only where CudaBackend::wgmma()
// (a Hopper GPU and a build with sm_90a code): elsewhere the launch fails.
void gemm_wgmma(const void* x, const void* w, void* out, int64_t T, int64_t N, int64_t K, GemmWgmmaForm form,
                void* stream);

}  // namespace nanovllm::cuda
