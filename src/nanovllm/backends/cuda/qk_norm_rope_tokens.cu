// The token kernel of the fused q/k RMSNorm + RoPE (+ KV-cache store) op, for prefills and large
// batches (plan_qk_norm_rope, kernel_plan.h, says when): the same bits as the head kernel
// (qk_norm_rope.cu, whose comment gives the arithmetic and why) in a mapping that keeps DRAM busy.
//
// Shapes: qkv [T, W] BF16 in place, W = (Hq + 2 Hkv) D, q heads then k heads then v heads; a head's
// value i pairs with i + D/2 (rotate-half). Mapping: a CTA takes rows x U whole tokens (U tokens
// per thread, 1 or 2) and the head slots [blockIdx.y * slots_per_cta, ...) of each (q, k, and with
// the cache store the v heads, which are copied); a group of L = 2^lanes_log2 lanes takes one slot
// of U tokens, lane j the V adjacent values [V j, V j + V) of each half (one 8- or 16-byte load per
// half; lanes with V j >= D/2 idle). Every lane issues all its loads right after the wait on the
// qkv GEMM, and only then does the CTA compute its tokens' cos/sin tables (the double-precision
// sincos, rows x U x D/2 entries over all threads) into shared memory; one barrier, then each group
// normalises and rotates its heads and stores 8- or 16-byte pieces to qkv and the cache rows.
// Against the head kernel (a CTA per token, the table by D/2 threads before the loads, then each
// warp walking 3-5 heads with 2-byte accesses) a CTA's life is one DRAM round trip.
//
// The sum of squares must be the head kernel's bit for bit: there lane l of a warp adds, for
// c = 0, 1, ... (i = l + 32 c < D/2), fma(b_i, b_i, a_i * a_i) to its partial p_l (a = x[i],
// b = x[i + D/2]), and warp_sum adds the 32 partials in a butterfly (p_l + p_{l^16}, then ^8, ^4,
// ^2, ^1). Here value i is in lane i / V of the group, so the same tree is rebuilt: with M = 32 / V
// lanes per c, lane j = c M + m holds the terms of old lanes V m + k (k < V) at that c; the c terms
// are gathered in order (p = t_c0 + t_c1 + ...), the butterfly levels 16 .. V are xor shuffles of
// lanes m ^ (level / V), the levels below V are sums inside the lane. Missing lanes and c count as
// zeros, which the head kernel's tree also adds (x + 0 = x for the non-negative sums).
#include "nanovllm/backends/cuda/fp8.cuh"
#include "nanovllm/backends/cuda/qk_norm_rope.cuh"

namespace nanovllm::cuda {
namespace {

// V BF16 values in one load, and their V E4M3 codes.
template <int V>
struct Vec;
template <>
struct Vec<8> {
  using bf = uint4;
  using codes = uint2;
};
template <>
struct Vec<4> {
  using bf = uint2;
  using codes = uint32_t;
};

template <int V>
__device__ __forceinline__ void to_floats(const typename Vec<V>::bf& u, float (&f)[V]) {
  const bf162* h = reinterpret_cast<const bf162*>(&u);
#pragma unroll
  for (int k = 0; k < V / 2; ++k) {
    const float2 t = __bfloat1622float2(h[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}

// V floats of shared memory (16-byte aligned) through float4 loads.
template <int V>
__device__ __forceinline__ void load_floats(const float* p, float (&f)[V]) {
#pragma unroll
  for (int k = 0; k < V; k += 4) {
    const float4 q = *reinterpret_cast<const float4*>(p + k);
    f[k] = q.x, f[k + 1] = q.y, f[k + 2] = q.z, f[k + 3] = q.w;
  }
}

template <int V>
__device__ __forceinline__ typename Vec<V>::bf pack_bf16(const bf16 (&y)[V]) {
  typename Vec<V>::bf u;
  bf162* h = reinterpret_cast<bf162*>(&u);
#pragma unroll
  for (int k = 0; k < V / 2; ++k) h[k] = __halves2bfloat162(y[2 * k], y[2 * k + 1]);
  return u;
}

// Keys: one code per value, as the head kernel converts them.
template <int V>
__device__ __forceinline__ typename Vec<V>::codes key_codes(const bf16 (&y)[V], float inv) {
  union {
    typename Vec<V>::codes u;
    uint8_t b[V];
  } c;
#pragma unroll
  for (int k = 0; k < V; ++k) c.b[k] = float_to_e4m3(__bfloat162float(y[k]) * inv);
  return c.u;
}

// Values: pairs of codes (pack8_e4m3's conversion, the head kernel's for head_dim % 8 == 0).
template <int V>
__device__ __forceinline__ typename Vec<V>::codes value_codes(const typename Vec<V>::bf& u, float inv) {
  float f[V];
  to_floats<V>(u, f);
  union {
    typename Vec<V>::codes u;
    __nv_fp8x2_storage_t p[V / 2];
  } c;
#pragma unroll
  for (int k = 0; k < V / 2; ++k)
    c.p[k] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * k] * inv, f[2 * k + 1] * inv), __NV_SATFINITE, __NV_E4M3);
  return c.u;
}

// The head kernel's sum of squares of one head (see the top), in lane j of its group of 2^lg lanes;
// every lane of the warp calls it (shuffles), idle lanes with zeros.
template <int V>
__device__ __forceinline__ float head_sum_squares(const typename Vec<V>::bf& ua, const typename Vec<V>::bf& ub, int lg,
                                                  int j) {
  constexpr int M = 32 / V;  // lanes of one c
  const int L = 1 << lg;
  float a[V], b[V], t[V];
  to_floats<V>(ua, a);
  to_floats<V>(ub, b);
#pragma unroll
  for (int k = 0; k < V; ++k) t[k] = __fmaf_rn(b[k], b[k], __fmul_rn(a[k], a[k]));  // the head kernel's contraction
  if (L > M) {  // several c: p = t_c0 + t_c1 + ... in c order
    const int m = j & (M - 1);
    float p[V];
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = __shfl_sync(0xffffffffu, t[k], m, L);
    for (int c = 1; c < L / M; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) p[k] = __fadd_rn(p[k], __shfl_sync(0xffffffffu, t[k], c * M + m, L));
#pragma unroll
    for (int k = 0; k < V; ++k) t[k] = p[k];
  }
#pragma unroll
  for (int s = M / 2; s >= 1; s >>= 1)  // butterfly levels 16 .. V: lane m ^ s (absent lanes: zeros)
    if (s < L)
#pragma unroll
      for (int k = 0; k < V; ++k) t[k] = __fadd_rn(t[k], __shfl_xor_sync(0xffffffffu, t[k], s, L));
#pragma unroll
  for (int h = V / 2; h >= 1; h >>= 1)  // levels below V: inside the lane
#pragma unroll
    for (int k = 0; k < h; ++k) t[k] = __fadd_rn(t[k], t[k + h]);
  return t[0];
}

// The cos/sin tables of the CTA's `ntok` tokens from t_base: [ntok][half] each.
__device__ __forceinline__ void fill_tables(float* cs, float* sn, const int32_t* __restrict__ pos,
                                            const InvFreq& inv_freq, float rope_scale, int64_t t_base, int64_t T,
                                            int ntok, int half) {
  for (int e = threadIdx.x; e < ntok * half; e += blockDim.x) {
    const int lt = e / half, i = e - lt * half;
    if (t_base + lt < T) rope_cos_sin(float(pos[t_base + lt]), inv_freq.v[i], rope_scale, cs[e], sn[e]);
  }
}

template <int V, int U>
__global__ void __launch_bounds__(kRopeTokenMaxThreads)
    qk_norm_rope_tokens_kernel(bf16* __restrict__ qkv, const bf16* __restrict__ qw, const bf16* __restrict__ kw,
                               const int32_t* __restrict__ pos, const InvFreq inv_freq, float rope_scale, int64_t T,
                               int64_t W, int Hq, int Hkv, int slots, int D, int lg, int slots_per_cta, int rows,
                               float eps, const KVDest kv, int64_t early_ctas) {
  using BV = typename Vec<V>::bf;
  using CV = typename Vec<V>::codes;
  extern __shared__ float tables[];  // cos [rows * U][half], then sin; then the q and k norm weights [D] each
  // As the head kernel: our successor may launch now (it reads nothing of this step before its wait).
  pdl_trigger();
  const int half = D / 2, ntok = rows * U;
  float* cs = tables;
  float* sn = tables + ntok * half;
  float* wts = sn + ntok * half;
  const int row_threads = slots_per_cta << lg;
  const int r = threadIdx.x / row_threads, in_row = threadIdx.x - r * row_threads;
  const int j = in_row & ((1 << lg) - 1), slot = int(blockIdx.y) * slots_per_cta + (in_row >> lg), i0 = j * V;
  const bool on = r < rows && slot < slots && i0 < half;
  const bool is_q = slot < Hq, is_v = slot >= Hq + Hkv;
  const int64_t t_base = int64_t(blockIdx.x) * ntok, t0 = t_base + int64_t(r) * U;
  // Before the wait: cache slots (uploads) and norm weights.
  int32_t dst[U];  // the token's cache row (-1: no store)
#pragma unroll
  for (int u = 0; u < U; ++u) dst[u] = kv.k && on && !is_q && t0 + u < T ? kv.slots[t0 + u] : -1;
  if (qw)  // weights in shared memory, not in registers held across the wait
    for (int i = threadIdx.x; i < 2 * D; i += blockDim.x) wts[i] = __bfloat162float(i < D ? qw[i] : kw[i - D]);
  const bool early = int64_t(blockIdx.y) * gridDim.x + blockIdx.x < early_ctas;
  if (early) fill_tables(cs, sn, pos, inv_freq, rope_scale, t_base, T, ntok, half);
  pdl_begin();
  BV a[U], b[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    a[u] = b[u] = BV{};
    if (on && t0 + u < T && (!is_v || dst[u] >= 0)) {
      const bf16* x = qkv + (t0 + u) * W + int64_t(slot) * D + i0;
      a[u] = *reinterpret_cast<const BV*>(x);
      b[u] = *reinterpret_cast<const BV*>(x + half);
    }
  }
  if (!early) fill_tables(cs, sn, pos, inv_freq, rope_scale, t_base, T, ntok, half);
  __syncthreads();
  const int64_t kv_row = int64_t(Hkv) * D;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t t = t0 + u;
    float inv = 1.0f;
    if (qw) inv = 1.0f / sqrtf(head_sum_squares<V>(a[u], b[u], lg, j) / float(D) + eps);
    if (!on || t >= T) continue;
    if (is_v) {  // a straight copy into the cache row (codes of value x inv_v with FP8)
      if (dst[u] < 0) continue;
      const int64_t at = int64_t(dst[u]) * kv_row + int64_t(slot - Hq - Hkv) * D + i0;
      if (kv.fp8) {
        uint8_t* vd = static_cast<uint8_t*>(kv.v) + at;
        *reinterpret_cast<CV*>(vd) = value_codes<V>(a[u], kv.inv_v);
        *reinterpret_cast<CV*>(vd + half) = value_codes<V>(b[u], kv.inv_v);
      } else {
        bf16* vd = static_cast<bf16*>(kv.v) + at;
        *reinterpret_cast<BV*>(vd) = a[u];
        *reinterpret_cast<BV*>(vd + half) = b[u];
      }
      continue;
    }
    // 16-byte shared loads: i0, half and the tables' offsets are multiples of 4 floats.
    float c[V], s[V], wa[V], wb[V];
    load_floats<V>(cs + (r * U + u) * half + i0, c);
    load_floats<V>(sn + (r * U + u) * half + i0, s);
    if (qw) {
      load_floats<V>(wts + (is_q ? 0 : D) + i0, wa);
      load_floats<V>(wts + (is_q ? 0 : D) + half + i0, wb);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) wa[k] = wb[k] = 1.f;  // no norm: inv and the weights are 1 (exact), as there
    }
    float fa[V], fb[V];
    to_floats<V>(a[u], fa);
    to_floats<V>(b[u], fb);
    bf16 ya[V], yb[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float xa = bf16_round(bf16_round(fa[k] * inv) * wa[k]);
      const float xb = bf16_round(bf16_round(fb[k] * inv) * wb[k]);
      ya[k] = __float2bfloat16(bf16_round(xa * c[k]) - bf16_round(xb * s[k]));
      yb[k] = __float2bfloat16(bf16_round(xb * c[k]) + bf16_round(xa * s[k]));
    }
    bf16* x = qkv + t * W + int64_t(slot) * D + i0;
    *reinterpret_cast<BV*>(x) = pack_bf16<V>(ya);
    *reinterpret_cast<BV*>(x + half) = pack_bf16<V>(yb);
    if (is_q || dst[u] < 0) continue;
    const int64_t at = int64_t(dst[u]) * kv_row + int64_t(slot - Hq) * D + i0;
    if (kv.fp8) {
      uint8_t* kd = static_cast<uint8_t*>(kv.k) + at;
      *reinterpret_cast<CV*>(kd) = key_codes<V>(ya, kv.inv_k);
      *reinterpret_cast<CV*>(kd + half) = key_codes<V>(yb, kv.inv_k);
    } else {
      bf16* kd = static_cast<bf16*>(kv.k) + at;
      *reinterpret_cast<BV*>(kd) = pack_bf16<V>(ya);
      *reinterpret_cast<BV*>(kd + half) = pack_bf16<V>(yb);
    }
  }
}

template <int V, int U>
void launch_tokens(const QkNormRopePlan& plan, bf16* qkv, const bf16* qw, const bf16* kw, const int32_t* pos,
                   const InvFreq& f, float rope_scale, int64_t T, int64_t W, int Hq, int Hkv, int D, float eps,
                   const KVDest& kv, int64_t early_ctas, Stream st) {
  int lg = 0;
  while ((1 << lg) < plan.lanes) ++lg;
  const int slots = Hq + Hkv + (kv.k ? Hkv : 0);
  const size_t smem = (size_t(2) * plan.rows * U * (D / 2) + (qw ? 2 * D : 0)) * sizeof(float);
  launch(qk_norm_rope_tokens_kernel<V, U>, dim3(unsigned(plan.ctas), unsigned(plan.slot_splits)), plan.threads, smem,
         st, qkv, qw, kw, pos, f, rope_scale, T, W, Hq, Hkv, slots, D, lg, plan.slots_per_cta, plan.rows, eps, kv,
         early_ctas);
}

}  // namespace

void launch_qk_norm_rope_tokens(const QkNormRopePlan& plan, bf16* qkv, const bf16* qw, const bf16* kw,
                                const int32_t* pos, const InvFreq& inv_freq, float rope_scale, int64_t T, int64_t W,
                                int Hq, int Hkv, int D, float eps, const KVDest& kv, int64_t early_ctas, Stream st) {
  if (plan.kernel != QkNormRopeKernel::Token || (plan.vec != 8 && plan.vec != 4) || plan.lanes * plan.vec < D / 2 ||
      plan.lanes > 32 || D % (2 * plan.vec) != 0 || plan.rows * plan.tokens_per_thread > kRopeTokenMaxTokens ||
      plan.threads > kRopeTokenMaxThreads)
    throw Error("qk_norm_rope: the token kernel does not take this plan (head_dim " + std::to_string(D) + ")");
  auto go = [&](auto v, auto u) {
    launch_tokens<decltype(v)::value, decltype(u)::value>(plan, qkv, qw, kw, pos, inv_freq, rope_scale, T, W, Hq, Hkv,
                                                          D, eps, kv, early_ctas, st);
  };
  using I8 = std::integral_constant<int, 8>;
  using I4 = std::integral_constant<int, 4>;
  using U1 = std::integral_constant<int, 1>;
  using U2 = std::integral_constant<int, 2>;
  if (plan.vec == 8)
    plan.tokens_per_thread == 2 ? go(I8{}, U2{}) : go(I8{}, U1{});
  else
    plan.tokens_per_thread == 2 ? go(I4{}, U2{}) : go(I4{}, U1{});
}

}  // namespace nanovllm::cuda
