// Prefill attention on CUDA cores: flash-attention style, for the head dims (not 64 or 128) and
// GQA groups (more than 64 query heads per kv head) that the tensor-core kernel of
// attention_prefill_mma.cu lacks; also decode for head dims the decode kernel lacks. Same function and
// arguments as that kernel (attention_prefill.cuh); an order of magnitude slower on long prompts
// (bench/RESULTS.md: "CUDA-core kernel 15.7 / 15.9"), so Qwen3 never takes it.
//
// A CTA takes (sequence, tile of TQ new tokens, kv head): its rows are the TQ x G (query token, GQA
// head) pairs, at most 16, 4 per warp. Keys come in tiles of 32 through shared memory (K transposed
// as float, V as BF16); lane j scores key j for the warp's 4 rows, online softmax {m, l, o} per
// row, o spread over lanes (2 dims per lane per 64). With a sliding window, key tiles before the
// first token's window are skipped and keys before a row's window are masked.
#include <algorithm>
#include <cfloat>

#include "nanovllm/backends/cuda/attention_prefill.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kTileKeys = 32;
constexpr int kRowsPerWarp = 4;
constexpr int kWarps = 4;
constexpr int kMaxRows = kRowsPerWarp * kWarps;  // 16

// NCH = ceil(D / 64): lane owns output dims {64 c + 2 lane, 64 c + 2 lane + 1}.
template <int NCH>
__global__ void __launch_bounds__(kWarps * 32)
    attn_tiled_kernel(const PrefillAttnArgs P, int G, int TQ, int tiles_per_seq) {
  extern __shared__ float smem[];
  pdl_begin();
  const int D = P.D;
  float* qs = smem;                                              // [kMaxRows][D] (pre-scaled, log2 domain)
  float* ks = qs + kMaxRows * D;                                 // [D][kTileKeys + 1] transposed keys
  bf16* vs = reinterpret_cast<bf16*>(ks + D * (kTileKeys + 1));  // [kTileKeys][D]

  const int b = blockIdx.x / tiles_per_seq, tile = blockIdx.x % tiles_per_seq, h = blockIdx.y;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int tok0 = tile * TQ;
  if (tok0 >= qlen) return;
  const int ntok = min(TQ, qlen - tok0), rows = ntok * G;
  const int ctx = P.ctx_lens[b];
  const int kmax = ctx - qlen + tok0 + ntok;  // keys visible to the tile's last token
  // With a sliding window, the tile's first token reads from key kmin on: earlier key tiles are skipped.
  const int kmin = P.window > 0 ? max(0, ctx - qlen + tok0 - P.window + 1) : 0;
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int i = tok0 + r / G, head = h * G + r % G;
    qs[idx] = __bfloat162float(P.qkv[int64_t(q0 + i) * P.W + int64_t(head) * D + d]) * P.scale_log2;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][NCH][2];
  int nk[kRowsPerWarp], lo[kRowsPerWarp];  // row j reads keys [lo[j], nk[j])
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.f;
    const int r = warp * kRowsPerWarp + j;
    nk[j] = r < rows ? ctx - qlen + tok0 + r / G + 1 : 0;
    lo[j] = P.window > 0 ? max(0, nk[j] - P.window) : 0;
#pragma unroll
    for (int c = 0; c < NCH; ++c) o[j][c][0] = o[j][c][1] = 0.f;
  }
  const int row0 = warp * kRowsPerWarp;
  const int dv = D / 8;  // 16-byte pieces per key row

  for (int kt = kmin / kTileKeys * kTileKeys; kt < kmax; kt += kTileKeys) {
    __syncthreads();  // previous tile consumed (and q loaded, first time)
    for (int idx = tid; idx < kTileKeys * dv; idx += blockDim.x) {
      const int key = idx / dv, part = idx % dv, j = kt + key;
      uint4 kk = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (j < kmax) {
        const int64_t slot = int64_t(table[j / P.bs]) * P.bs + j % P.bs;
        const int64_t off = (slot * P.Hkv + h) * D + part * 8;
        kk = *reinterpret_cast<const uint4*>(P.kc + off);
        vv = *reinterpret_cast<const uint4*>(P.vc + off);
      }
      float f[8];
      unpack8(kk, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ks[(part * 8 + e) * (kTileKeys + 1) + key] = f[e];
      *reinterpret_cast<uint4*>(vs + key * D + part * 8) = vv;
    }
    __syncthreads();
    if (row0 >= rows) continue;

    // Scores of key kt + lane for the warp's rows.
    float s[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) s[j] = 0.f;
    for (int d = 0; d < D; ++d) {
      const float kv = ks[d * (kTileKeys + 1) + lane];
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) s[j] += qs[(row0 + j) * D + d] * kv;
    }
    float p[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      if (kt + lane >= nk[j] || kt + lane < lo[j]) s[j] = -INFINITY;
      const float mnew = fmaxf(m[j], warp_max(s[j]));
      const float corr = mnew == -INFINITY ? 1.f : exp2f(m[j] - mnew);
      p[j] = mnew == -INFINITY ? 0.f : exp2f(s[j] - mnew);
      l[j] = l[j] * corr + p[j];  // lane-partial; summed over lanes at the end
      m[j] = mnew;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        o[j][c][0] *= corr;
        o[j][c][1] *= corr;
      }
    }
    // o += P V over the tile's keys.
    const int klim = min(kTileKeys, kmax - kt);
    for (int k = 0; k < klim; ++k) {
      float2 v[NCH];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int d = 64 * c + 2 * lane;
        v[c] = d < D ? __bfloat1622float2(*reinterpret_cast<const bf162*>(vs + k * D + d)) : make_float2(0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const float pk = __shfl_sync(0xffffffffu, p[j], k);
#pragma unroll
        for (int c = 0; c < NCH; ++c) {
          o[j][c][0] += pk * v[c].x;
          o[j][c][1] += pk * v[c].y;
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int r = row0 + j;
    const float lsum = warp_sum(l[j]);
    if (r >= rows) continue;
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
    const int i = tok0 + r / G, head = h * G + r % G;
    bf16* orow = P.out + int64_t(q0 + i) * P.Hq * D + int64_t(head) * D;
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int d = 64 * c + 2 * lane;
      if (d < D) *reinterpret_cast<bf162*>(orow + d) = __floats2bfloat162_rn(o[j][c][0] * inv, o[j][c][1] * inv);
    }
  }
}

template <int NCH>
void launch_tiled(const PrefillAttnArgs& a, Stream st) {
  const int G = a.Hq / a.Hkv, TQ = std::max(1, kMaxRows / G);
  const int tiles = (a.max_q + TQ - 1) / TQ;
  if (tiles == 0) return;
  const size_t smem = size_t(kMaxRows) * a.D * 4 + size_t(a.D) * (kTileKeys + 1) * 4 + size_t(kTileKeys) * a.D * 2;
  if (smem > 48 * 1024)
    NV_CUDA_CHECK(cudaFuncSetAttribute(attn_tiled_kernel<NCH>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(attn_tiled_kernel<NCH>, dim3(unsigned(a.B) * unsigned(tiles), unsigned(a.Hkv)), dim3(kWarps * 32), smem, st, a,
         G, TQ, tiles);
}

}  // namespace

void prefill_attention_tiled(const PrefillAttnArgs& a, Stream st) {
  if (a.D <= 64)
    launch_tiled<1>(a, st);
  else if (a.D <= 128)
    launch_tiled<2>(a, st);
  else
    launch_tiled<4>(a, st);
}

}  // namespace nanovllm::cuda
