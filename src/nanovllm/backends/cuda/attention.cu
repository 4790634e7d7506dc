// Paged causal attention on BF16 caches [num_blocks, block_size, Hkv, D] with FP32 softmax.
// Sequence b computes the q tokens cu_seqlens_q[b]..cu_seqlens_q[b+1]), the last of its
// context_lens[b] keys; its new token i sees keys [0, ctx - qlen + i]. Every key is read from the
// paged cache through the block table (prefix-cache hits and earlier prefill chunks included).
//
// Two kernels:
//  * attn_tiled_kernel (prefill, and decode for head dims the decode kernel lacks): flash-attention
//    style on CUDA cores. A CTA takes (sequence, tile of TQ new tokens, kv head): its rows are the
//    TQ x G (query token, GQA head) pairs, at most 16, 4 per warp. Keys come in tiles of 32 through
//    shared memory (K transposed as float, V as BF16); lane j scores key j for the warp's 4 rows,
//    online softmax {m, l, o} per row, o spread over lanes (2 dims per lane per 64).
//  * decode (one new token per sequence, D = 64/128, G <= 8): the split-KV kernel of
//    attention_decode.cu.
#include <cfloat>

#include "nanovllm/backends/cuda/attention_decode.cuh"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/ops/checks.h"

namespace nanovllm {

using namespace cuda;

constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------- tiled (prefill) kernel

constexpr int kTileKeys = 32;
constexpr int kRowsPerWarp = 4;
constexpr int kWarps = 4;
constexpr int kMaxRows = kRowsPerWarp * kWarps;  // 16

struct AttnParams {
  const bf16* qkv;
  const bf16* kc;
  const bf16* vc;
  bf16* out;
  const int32_t* cu_q;
  const int32_t* ctx_lens;
  const int32_t* block_tables;
  int max_blocks, Hq, Hkv, D, bs, G, TQ, tiles_per_seq;
  int64_t W;
  float scale_log2;
};

// NCH = ceil(D / 64): lane owns output dims {64 c + 2 lane, 64 c + 2 lane + 1}.
template <int NCH>
__global__ void __launch_bounds__(kWarps * 32) attn_tiled_kernel(const AttnParams P) {
  extern __shared__ float smem[];
  pdl_begin();
  const int D = P.D;
  float* qs = smem;                                              // [kMaxRows][D] (pre-scaled, log2 domain)
  float* ks = qs + kMaxRows * D;                                 // [D][kTileKeys + 1] transposed keys
  bf16* vs = reinterpret_cast<bf16*>(ks + D * (kTileKeys + 1));  // [kTileKeys][D]

  const int b = blockIdx.x / P.tiles_per_seq, tile = blockIdx.x % P.tiles_per_seq, h = blockIdx.y;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int tok0 = tile * P.TQ;
  if (tok0 >= qlen) return;
  const int ntok = min(P.TQ, qlen - tok0), rows = ntok * P.G;
  const int ctx = P.ctx_lens[b];
  const int kmax = ctx - qlen + tok0 + ntok;  // keys visible to the tile's last token
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int i = tok0 + r / P.G, head = h * P.G + r % P.G;
    qs[idx] = __bfloat162float(P.qkv[int64_t(q0 + i) * P.W + int64_t(head) * D + d]) * P.scale_log2;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][NCH][2];
  int nk[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.f;
    const int r = warp * kRowsPerWarp + j;
    nk[j] = r < rows ? ctx - qlen + tok0 + r / P.G + 1 : 0;
#pragma unroll
    for (int c = 0; c < NCH; ++c) o[j][c][0] = o[j][c][1] = 0.f;
  }
  const int row0 = warp * kRowsPerWarp;
  const int dv = D / 8;  // 16-byte pieces per key row

  for (int kt = 0; kt < kmax; kt += kTileKeys) {
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
      if (kt + lane >= nk[j]) s[j] = -INFINITY;
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
    const int i = tok0 + r / P.G, head = h * P.G + r % P.G;
    bf16* orow = P.out + int64_t(q0 + i) * P.Hq * D + int64_t(head) * D;
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int d = 64 * c + 2 * lane;
      if (d < D) *reinterpret_cast<bf162*>(orow + d) = __floats2bfloat162_rn(o[j][c][0] * inv, o[j][c][1] * inv);
    }
  }
}

int CudaBackend::decode_splits(int64_t num_seqs, int64_t num_kv_heads) const {
  const int64_t ctas = std::max<int64_t>(1, num_seqs * num_kv_heads);
  const int64_t want = (2 * int64_t(num_sms_) + ctas - 1) / ctas;
  return int(std::clamp<int64_t>(want, 1, std::clamp(max_decode_splits_, 1, kDecodeMaxSplits)));
}

template <int NCH>
static void launch_tiled(const AttnParams& p, unsigned gx, unsigned gy, size_t smem, Stream s) {
  if (smem > 48 * 1024)
    NV_CUDA_CHECK(cudaFuncSetAttribute(attn_tiled_kernel<NCH>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(attn_tiled_kernel<NCH>, dim3(gx, gy), kWarps * 32, smem, s, p);
}

void CudaBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                            int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                            const AttentionMetadata& md) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "attention");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  const int64_t T = qkv.size(0), D = head_dim;
  if (out.dim() != 2 || out.size(0) != T || out.size(1) != num_heads * D)
    throw Error("attention: out must be [T, Hq*D], got " + shape_str(out.shape()));
  if (qkv.dtype() != DType::BF16 || k_cache.dtype() != DType::BF16 || v_cache.dtype() != DType::BF16 ||
      out.dtype() != DType::BF16)
    throw Error("attention: qkv, caches and out must be BF16");
  if (D % 8 != 0 || D > 256)
    throw Error("attention: head_dim " + std::to_string(D) + " must be a multiple of 8, at most 256");
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
    throw Error("attention: num_heads must be a multiple of num_kv_heads");
  const int64_t G = num_heads / num_kv_heads;
  if (G > kMaxRows) throw Error("attention: more than 16 query heads per kv head are not supported");
  if (!md.d_cu_seqlens_q.defined()) throw Error("attention: prepare_metadata() was not called for this batch");
  if (T == 0 || md.num_seqs == 0) return;
  const Stream s = on_stream();
  const int64_t B = md.num_seqs;
  const float scale_log2 = scale * kLog2e;

  const bool decode = !md.is_prefill && T == B && (D == 64 || D == 128) && G <= 8;
  if (decode) {
    DecodeAttnArgs a;
    a.qkv = qkv.data<bf16>();
    a.kc = k_cache.data<bf16>();
    a.vc = v_cache.data<bf16>();
    a.out = out.data<bf16>();
    a.ctx_lens = md.d_context_lens.data<int32_t>();
    a.block_tables = md.max_blocks > 0 ? md.d_block_tables.data<int32_t>() : nullptr;
    a.max_blocks = int(md.max_blocks);
    a.B = int(B);
    a.Hq = int(num_heads);
    a.Hkv = int(num_kv_heads);
    a.D = int(D);
    a.bs = int(k_cache.size(1));
    a.S = decode_splits(B, num_kv_heads);
    a.warps = decode_warps_;
    a.cluster = a.S > 1 && a.S <= decode_cluster_limit_;
    a.W = qkv.size(1);
    a.scale_log2 = scale_log2;
    Tensor part_o, part_lse;
    if (a.S > 1 && !a.cluster) {
      part_o = empty({B * num_heads * a.S * D}, DType::F32);
      part_lse = empty({B * num_heads * a.S}, DType::F32);
      a.part_o = part_o.data<float>();
      a.part_lse = part_lse.data<float>();
    }
    decode_attention(a, s);
    return;
  }

  AttnParams p{};
  p.qkv = qkv.data<bf16>();
  p.kc = k_cache.data<bf16>();
  p.vc = v_cache.data<bf16>();
  p.out = out.data<bf16>();
  p.cu_q = md.d_cu_seqlens_q.data<int32_t>();
  p.ctx_lens = md.d_context_lens.data<int32_t>();
  p.block_tables = md.max_blocks > 0 ? md.d_block_tables.data<int32_t>() : nullptr;
  p.max_blocks = int(md.max_blocks);
  p.Hq = int(num_heads);
  p.Hkv = int(num_kv_heads);
  p.D = int(D);
  p.bs = int(k_cache.size(1));
  p.G = int(G);
  p.TQ = int(std::max<int64_t>(1, kMaxRows / G));
  int64_t max_q = 0;
  for (int64_t b = 0; b < B; ++b)
    max_q = std::max<int64_t>(max_q, md.cu_seqlens_q[size_t(b + 1)] - md.cu_seqlens_q[size_t(b)]);
  p.tiles_per_seq = int((max_q + p.TQ - 1) / p.TQ);
  if (p.tiles_per_seq == 0) return;
  p.W = qkv.size(1);
  p.scale_log2 = scale_log2;
  const size_t smem = size_t(kMaxRows) * D * 4 + size_t(D) * (kTileKeys + 1) * 4 + size_t(kTileKeys) * D * 2;
  const unsigned gx = unsigned(B * p.tiles_per_seq), gy = unsigned(num_kv_heads);
  if (D <= 64)
    launch_tiled<1>(p, gx, gy, smem, s);
  else if (D <= 128)
    launch_tiled<2>(p, gx, gy, smem, s);
  else
    launch_tiled<4>(p, gx, gy, smem, s);
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm
