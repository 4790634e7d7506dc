// Our own Hopper BF16 GEMM (gemm_wgmma.cu), host side: out[T, N] = x[T, K] @ w[N, K]^T, BF16
// operands and output, FP32 accumulation, as CudaBackend::linear's cuBLASLt GEMM computes it. Its
// epilogue takes the ops cuBLASLt has no epilogue for: SiLU-and-mul (GateUpSilu) and the q/k norm +
// RoPE + KV store (gemm_wgmma_rope), the residual add + RMSNorm after a row-parallel projection
// (gemm_wgmma_add_rms_norm). The backend's linear ops run it under KernelOptions::gemm
// (kernel_plan.h: plan_linear, linear_rope_fuses); bench/gemm_bench.cpp measures it against cuBLASLt.
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
// rounded as linear + silu_and_mul round it (a tile: 128 outputs, their gate and up rows).
// Cols256Stages3EpiWarps, GateUpSiluEpiWarps: those two with the outputs staged for an epilogue warp
// that stores them (3 and 4 ring stages). The Pair forms: those on thread-block clusters of two CTAs
// that take the same weight rows (x rows a CTA tile apart) and read each weight stage from L2 once, each
// loading half and multicasting it to both (KernelOptions::gemm_pair). The PingPong forms
// (KernelOptions::gemm_pingpong): persistent TMA-store forms whose CTA tile is 64 rows, each compute
// warpgroup taking every other tile of the CTA, so that one warpgroup's epilogue runs while the other's
// products keep the tensor cores busy (CUTLASS's ping-pong kernel); 4 stages of 64 x 64 and 256 x 64.
// kGemmWgmmaForms: the plain forms.
enum class GemmWgmmaForm {
  Cols256Stages4,
  Cols256Stages4Persistent,
  Cols256Stages4PersistentTmaStore,
  Cols128Stages6,
  GateUpSilu,
  Cols256Stages3EpiWarps,
  GateUpSiluEpiWarps,
  Cols256Stages4PersistentTmaStorePair,
  GateUpSiluEpiWarpsPair,
  Cols256PingPong,
  Cols256PingPongPair,
  GateUpSiluPingPong,
  GateUpSiluPingPongPair
};
inline constexpr GemmWgmmaForm kGemmWgmmaForms[] = {GemmWgmmaForm::Cols256Stages4,
                                                    GemmWgmmaForm::Cols256Stages4Persistent,
                                                    GemmWgmmaForm::Cols256Stages4PersistentTmaStore,
                                                    GemmWgmmaForm::Cols128Stages6,
                                                    GemmWgmmaForm::Cols256Stages3EpiWarps,
                                                    GemmWgmmaForm::Cols256Stages4PersistentTmaStorePair,
                                                    GemmWgmmaForm::Cols256PingPong,
                                                    GemmWgmmaForm::Cols256PingPongPair};
const char* gemm_wgmma_form_name(GemmWgmmaForm form);
constexpr bool gemm_wgmma_form_pairs(GemmWgmmaForm form) {
  return form == GemmWgmmaForm::Cols256Stages4PersistentTmaStorePair || form == GemmWgmmaForm::GateUpSiluEpiWarpsPair ||
         form == GemmWgmmaForm::Cols256PingPongPair || form == GemmWgmmaForm::GateUpSiluPingPongPair;
}
// The form the backend runs: the plain persistent TMA-store product or (silu) the fused gate_up +
// SiLU with its epilogue warp, in pairs and / or ping-pong as asked.
constexpr GemmWgmmaForm gemm_wgmma_form(bool silu, bool pair, bool ping_pong) {
  using F = GemmWgmmaForm;
  if (silu)
    return ping_pong ? (pair ? F::GateUpSiluPingPongPair : F::GateUpSiluPingPong)
                     : (pair ? F::GateUpSiluEpiWarpsPair : F::GateUpSiluEpiWarps);
  return ping_pong ? (pair ? F::Cols256PingPongPair : F::Cols256PingPong)
                   : (pair ? F::Cols256Stages4PersistentTmaStorePair : F::Cols256Stages4PersistentTmaStore);
}

// Lets every form's kernel use its shared memory: once per device, before any gemm_wgmma there
// (CudaBackend's constructor, where wgmma() holds).
void gemm_wgmma_init();
// The clusters of two CTAs of the Pair forms that the device holds at once (after gemm_wgmma_init()).
int gemm_wgmma_max_pairs();

// Runs the GEMM on `stream` (a cudaStream_t). x, w, out: device BF16, row-major and dense (GateUpSilu:
// w [2 N][K]); T, N >= 1, K >= 8 with K % 8 == 0 (the TMA row pitch); the tails of T, N and K are
// handled (zero-filled reads, guarded stores); Error for shapes outside the limits. num_sms: the
// CTAs the persistent forms' grid may hold at once: the device's SMs, or for the Pair forms twice
// gemm_wgmma_max_pairs(). Only where CudaBackend::wgmma() (a Hopper GPU and a
// build with sm_90a code) and after gemm_wgmma_init(): elsewhere the launch fails. row_scale
// (device F32 [T], or null): each row of the product is multiplied by its factor before the
// epilogue (the SiLU, or gemm_wgmma_rope's norm + RoPE): the folded RMSNorm's 1 / rms
// (models/norm_fold.h).
void gemm_wgmma(const void* x, const void* w, void* out, int64_t T, int64_t N, int64_t K, GemmWgmmaForm form,
                int num_sms, void* stream, const float* row_scale = nullptr);

// The attention's qkv projection with qk_norm_rope_store in its epilogue (the persistent TMA-store
// form): qkv [T, (Hq + 2 Hkv) 128] = x w^T rounded to BF16, then, bit for bit as
// CudaBackend::qk_norm_rope_store computes it on that output, the q and k heads RMS-normalised
// (q_norm / k_norm [128] BF16; both null: no norm) and rotated (rotate-half) with cos_sin [T][64]
// (BF16 pairs, cos in the low half, sin: row t's position, rope_cos_sin's values, qk_norm_rope.cuh);
// the q heads are written into qkv, the k (after RoPE) and v heads of row t only into the caches
// [slots][Hkv][128] BF16 at slots[t] (-1: not; slots null: no store): qkv's k and v columns are left
// as they were. Head dim 128 and Hq + 2 Hkv even: a 256-column tile is two whole heads. pair: on
// clusters of two CTAs as the Pair forms (num_sms then twice gemm_wgmma_max_pairs()); ping_pong: as
// the PingPong forms.
struct GemmRopeEpilogue {
  const uint32_t* cos_sin = nullptr;
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  float eps = 1e-6f;
  int num_heads = 0, num_kv_heads = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const int32_t* slots = nullptr;
};
void gemm_wgmma_rope(const void* x, const void* w, void* qkv, int64_t T, int64_t K, const GemmRopeEpilogue& rope,
                     int num_sms, void* stream, bool pair = false, bool ping_pong = false,
                     const float* row_scale = nullptr);

// A row-parallel projection and the decoder layer's add + RMSNorm after it, in one kernel
// (gemm_wgmma_norm.cu): residual += x w^T (rounded to BF16, as linear then add_rms_norm round);
// out = rms_norm(residual) * norm_w. x [T, K], w [H, K], residual and out [T, H], norm_w [H]: BF16,
// dense, 16-byte aligned; out does not overlap the others. A thread-block cluster of H / 256 CTAs
// owns 128 rows, so H is a multiple of 256 up to 2,048 (gemm_wgmma_add_rms_norm_fits); K % 8 == 0.
// residual equals linear + add_rms_norm's bit for bit, out within a BF16 rounding (its sum of squares
// is added in another order). max_clusters: gemm_wgmma_add_rms_norm_max_clusters(H), the clusters
// resident at once (the grid). Needs gemm_wgmma_add_rms_norm_init() first, as gemm_wgmma.
bool gemm_wgmma_add_rms_norm_fits(int64_t T, int64_t H, int64_t K);
int gemm_wgmma_add_rms_norm_max_clusters(int64_t H);
void gemm_wgmma_add_rms_norm_init();
void gemm_wgmma_add_rms_norm(const void* x, const void* w, void* residual, const void* norm_w, float eps, void* out,
                             int64_t T, int64_t H, int64_t K, int max_clusters, void* stream);

}  // namespace nanovllm::cuda
