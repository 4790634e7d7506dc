// Prefill attention on tensor cores: flash-attention-2 (Dao, 2023) over the paged BF16 KV cache,
// FP32 online softmax in registers, writing nothing but O. Head dims 64 and 128.
//
// Work: a CTA per (sequence b, tile of kBM = 64 query rows, kv head h). The rows are packed GQA
// rows: row r is new token tok0 + r / G of query head h * G + r % G, so the G heads that share a
// kv head share every K/V tile (FlashInfer's layout; for Qwen3-8B, G = 4, a quarter of the K/V
// traffic of one CTA per query head). 64 / G tokens per tile; rows past the tile's tokens are
// padding (Q zero-filled, never written). The grid walks a sequence's tiles last-first, since the
// last rows see the most keys (causal), so the longest CTAs start first.
//
// Threads: 4 warps; warp w owns rows 16w..16w+15 for the whole kernel. Keys come in tiles of kBN =
// 64 through shared memory, double-buffered: the cp.async copies of tile t+1 (K and V rows gathered
// through the block table, 16 bytes per copy, zero-filled past the last key) are in flight while
// tile t is computed. Per tile and warp:
//   S (16 x 64) = Q K^T:  Q fragments stay in registers (loaded once by ldmatrix), K fragments by
//                         ldmatrix from shared memory, D/16 x 8 mma.m16n8k16;
//   causal mask:          only tiles that cross the diagonal of the CTA's first row (key index
//                         > ctx - qlen + row's token) are masked; tiles past the last row's limit
//                         are never loaded;
//   online softmax:       each lane holds 2 rows x 16 scores; row max/sum over the 4 lanes of a
//                         row (shuffles); the running O is rescaled by 2^(m_old - m_new);
//   O (16 x D) += P V:    P rounded to BF16 straight from the S accumulators (their layout is the
//                         A fragment's), V fragments by ldmatrix.trans.
// Shared memory rows are D BF16; the 16-byte chunk c of row r is stored at chunk c ^ (r % 8), so
// the 8 row addresses of each ldmatrix phase fall in 8 different bank groups (no conflicts).
// Shared memory per CTA: (64 + 4 x 64) rows x D x 2 bytes = 80 KiB at D = 128 (two CTAs per SM on
// an H100), 40 KiB at D = 64.
#include <cfloat>

#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kBM = 64;  // query rows per CTA
constexpr int kBN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

template <int D>
constexpr size_t smem_bytes() {
  return size_t(kBM + 4 * kBN) * D * sizeof(bf16);
}

// Element offset of 16-byte chunk c of row r in a [rows][D] tile, swizzled.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <int D>
__global__ void __launch_bounds__(kThreads) prefill_attn_tc_kernel(const PrefillAttnArgs P, int G, int tiles_per_seq) {
  constexpr int CH = D / 8;    // 16-byte chunks per row
  constexpr int KS = D / 16;   // k-steps of Q K^T
  constexpr int NT = kBN / 8;  // 8-key column tiles of S
  constexpr int DT = D / 8;    // 8-dim column tiles of O
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [kBM][D]
  bf16* ks = qs + kBM * D;                       // [2][kBN][D]
  bf16* vs = ks + 2 * kBN * D;                   // [2][kBN][D]
  pdl_begin();

  const int h = blockIdx.y;
  const int b = blockIdx.x / tiles_per_seq;
  const int tile = tiles_per_seq - 1 - blockIdx.x % tiles_per_seq;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int TQ = kBM / G;  // tokens per tile
  const int tok0 = tile * TQ;
  if (tok0 >= qlen) return;
  const int rows = min(TQ, qlen - tok0) * G;
  const int past = P.ctx_lens[b] - qlen;  // keys before the first new token
  const int kmax = past + tok0 + rows / G;  // keys seen by the tile's last token
  const int kfull = past + tok0 + 1;        // keys [0, kfull) are seen by every row
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < kBM * CH; idx += kThreads) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = r < rows;
    const bf16* src = ok ? P.qkv + int64_t(q0 + tok0 + r / G) * P.W + int64_t(h * G + r % G) * D + c * 8 : P.qkv;
    cp_async16(qs + swz<D>(r, c), src, ok ? 16 : 0);
  }
  auto load_kv = [&](int buf, int kt) {
    bf16* kd = ks + buf * kBN * D;
    bf16* vd = vs + buf * kBN * D;
    for (int idx = tid; idx < kBN * CH; idx += kThreads) {
      const int key = idx / CH, c = idx % CH, j = kt + key;
      const bool ok = j < kmax;
      int64_t off = 0;
      if (ok) off = ((int64_t(table[j / P.bs]) * P.bs + j % P.bs) * P.Hkv + h) * D + c * 8;
      cp_async16(kd + swz<D>(key, c), P.kc + off, ok ? 16 : 0);
      cp_async16(vd + swz<D>(key, c), P.vc + off, ok ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  // This lane's two rows (g and g + 8 of the warp's 16) and the last key each may see.
  const int ra = warp * 16 + (lane >> 2), rb = ra + 8;
  const int lim_a = ra < rows ? past + tok0 + ra / G : kmax - 1;
  const int lim_b = rb < rows ? past + tok0 + rb / G : kmax - 1;
  const float sl2 = P.scale_log2;

  uint32_t qf[KS][4];
  float o[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

  const int ntiles = (kmax + kBN - 1) / kBN;
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<0>();
    __syncthreads();  // tile t landed for every thread; tile t - 1's buffer is free
    if (t + 1 < ntiles) load_kv((t + 1) & 1, (t + 1) * kBN);
    cp_async_commit();
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) ldmatrix_x4(qf[kk], qs + swz<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
    }
    const bf16* kb = ks + (t & 1) * kBN * D;
    const bf16* vb = vs + (t & 1) * kBN * D;

    float s[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf, kb + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)));
        mma_bf16_16816(s[2 * np], qf[kk], kf[0], kf[1]);
        mma_bf16_16816(s[2 * np + 1], qf[kk], kf[2], kf[3]);
      }

    const int kt = t * kBN;
    if (kt + kBN > kfull) {  // the tile crosses some row's causal limit
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = kt + j * 8 + (lane & 3) * 2 + e;
          if (key > lim_a) s[j][e] = -INFINITY;
          if (key > lim_b) s[j][2 + e] = -INFINITY;
        }
    }

    // Online softmax. Key 0 is visible to every row and lies in tile 0, so the maxima are finite
    // from the first tile on and 2^(-inf) = 0 takes care of masked scores.
    float mx_a = m_a, mx_b = m_b;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      mx_a = fmaxf(mx_a, fmaxf(s[j][0], s[j][1]));
      mx_b = fmaxf(mx_b, fmaxf(s[j][2], s[j][3]));
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
    const float corr_a = exp2f((m_a - mx_a) * sl2), corr_b = exp2f((m_b - mx_b) * sl2);
    m_a = mx_a;
    m_b = mx_b;
    const float ma = mx_a * sl2, mb = mx_b * sl2;
    float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      s[j][0] = exp2f(fmaf(s[j][0], sl2, -ma));
      s[j][1] = exp2f(fmaf(s[j][1], sl2, -ma));
      s[j][2] = exp2f(fmaf(s[j][2], sl2, -mb));
      s[j][3] = exp2f(fmaf(s[j][3], sl2, -mb));
      sum_a += s[j][0] + s[j][1];
      sum_b += s[j][2] + s[j][3];
    }
    l_a = l_a * corr_a + sum_a;  // this lane's part of the row sum; the 4 lanes add up at the end
    l_b = l_b * corr_b + sum_b;
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      o[i][0] *= corr_a;
      o[i][1] *= corr_a;
      o[i][2] *= corr_b;
      o[i][3] *= corr_b;
    }

#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t pf[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]), pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < DT / 2; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vb + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * dp + (lane >> 4)));
        mma_bf16_16816(o[2 * dp], pf, vf[0], vf[1]);
        mma_bf16_16816(o[2 * dp + 1], pf, vf[2], vf[3]);
      }
    }
  }

  l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
  const int64_t ostride = int64_t(P.Hq) * D;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half ? rb : ra;
    if (r >= rows) continue;
    const float inv = 1.f / (half ? l_b : l_a);
    bf16* orow = P.out + int64_t(q0 + tok0 + r / G) * ostride + int64_t(h * G + r % G) * D + (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < DT; ++i)
      *reinterpret_cast<bf162*>(orow + i * 8) =
          __floats2bfloat162_rn(o[i][2 * half] * inv, o[i][2 * half + 1] * inv);
  }
}

template <int D>
void launch_tc(const PrefillAttnArgs& a, Stream st) {
  const int G = a.Hq / a.Hkv, TQ = kBM / G;
  const int tiles = (a.max_q + TQ - 1) / TQ;
  if (tiles == 0) return;
  launch(prefill_attn_tc_kernel<D>, dim3(unsigned(a.B) * unsigned(tiles), unsigned(a.Hkv)), dim3(kThreads),
         smem_bytes<D>(), st, a, G, tiles);
}

}  // namespace

bool prefill_attention_tc_supports(int D, int G) { return (D == 64 || D == 128) && G >= 1 && G <= kBM; }

void prefill_attention_tc(const PrefillAttnArgs& a, Stream st) {
  if (a.D == 64)
    launch_tc<64>(a, st);
  else
    launch_tc<128>(a, st);
}

void prefill_attention_init() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_tc_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(smem_bytes<64>())));
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_tc_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(smem_bytes<128>())));
}

}  // namespace nanovllm::cuda
