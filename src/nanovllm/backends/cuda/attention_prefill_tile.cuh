// The per-tile softmax step shared by the tensor-core prefill kernels (attention_prefill_mma.cu on
// mma.sync, attention_prefill_wgmma.cu on wgmma): both leave a warp's 16 query rows x 64 keys of
// scores in the m16n8 accumulator layout (lane holds rows g = lane / 4 and g + 8, columns
// 8j + 2(lane % 4) + {0, 1}), and both keep O in the same layout over the head dims.
#pragma once
#include <cfloat>

#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {

// Causal mask, then one online-softmax step over a tile of NT * 8 keys starting at key kt:
//  - scores of keys past a row's limit lim[hf] (the last key its token sees) become -inf, only
//    when the tile crosses the first row's limit (kt + NT * 8 > kfull);
//  - the running max m[hf] and this lane's part of the row sum l[hf] are updated (the 4 lanes of
//    a row add their parts at the end); corr[hf] = 2^(m_old - m_new) is what O must be scaled by
//    (softmax_tile does it here; attention_prefill_wgmma_tma.cu once the P V product in flight is done);
//  - s is left holding the probabilities 2^(s * sl2 - m * sl2), ready to round into P.
// Without a sliding window key 0 is visible to every row and lies in the first tile, so the maxima
// are finite from the first tile on and 2^(-inf) = 0 takes care of masked scores (softmax_half
// guards the windowed case). sl2 = softmax scale * log2(e).
template <int NT>
__device__ __forceinline__ void mask_tile(float (&s)[NT][4], const int (&lim)[2], int kt, int kfull, int lane) {
  if (kt + NT * 8 > kfull) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kt + j * 8 + (lane & 3) * 2 + (e & 1);
        if (key > lim[e >> 1]) s[j][e] = -INFINITY;
      }
  }
}

// Sliding window W: scores of keys before a row's window (key <= lim - W) become -inf. Only the
// mma.sync kernel calls it, for tiles that reach below the last row's window.
template <int NT>
__device__ __forceinline__ void mask_window(float (&s)[NT][4], const int (&lim)[2], int kt, int window, int lane) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = kt + j * 8 + (lane & 3) * 2 + (e & 1);
      if (key <= lim[e >> 1] - window) s[j][e] = -INFINITY;
    }
}

// The online-softmax step of the lane's rows half hf (g or g + 8); returns 2^(m_old - m_new). With
// kMaybeEmpty (a sliding window: a row may have no visible key in a tile yet), such a row keeps
// m = -inf, corr 1 and probabilities 0; without it the kernels keep their code as it was.
template <bool kMaybeEmpty = false, int NT>
__device__ __forceinline__ float softmax_half(float (&s)[NT][4], float (&m)[2], float (&l)[2], int hf, float sl2) {
  float mx = m[hf];
#pragma unroll
  for (int j = 0; j < NT; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * hf], s[j][2 * hf + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const bool none = kMaybeEmpty && mx == -INFINITY;
  const float corr = none ? 1.f : exp2f((m[hf] - mx) * sl2);
  m[hf] = mx;
  const float ms = none ? 0.f : mx * sl2;
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    s[j][2 * hf] = exp2f(fmaf(s[j][2 * hf], sl2, -ms));
    s[j][2 * hf + 1] = exp2f(fmaf(s[j][2 * hf + 1], sl2, -ms));
    sum += s[j][2 * hf] + s[j][2 * hf + 1];
  }
  l[hf] = l[hf] * corr + sum;
  return corr;
}

template <int NT>
__device__ __forceinline__ void softmax_scores(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&corr)[2],
                                               const int (&lim)[2], int kt, int kfull, float sl2, int lane) {
  mask_tile(s, lim, kt, kfull, lane);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) corr[hf] = softmax_half(s, m, l, hf, sl2);
}

template <int DT>
__device__ __forceinline__ void rescale_rows(float (&o)[DT][4], const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < DT; ++i) {
    o[i][0] *= corr[0];
    o[i][1] *= corr[0];
    o[i][2] *= corr[1];
    o[i][3] *= corr[1];
  }
}

template <bool kMaybeEmpty = false, int NT, int DT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&o)[DT][4], float (&m)[2], float (&l)[2],
                                             const int (&lim)[2], int kt, int kfull, float sl2, int lane) {
  mask_tile(s, lim, kt, kfull, lane);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float corr = softmax_half<kMaybeEmpty>(s, m, l, hf, sl2);
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      o[i][2 * hf] *= corr;
      o[i][2 * hf + 1] *= corr;
    }
  }
}

// P for keys 16 kk .. 16 kk + 15 as an m16k16 A fragment, straight from the probabilities.
template <int NT>
__device__ __forceinline__ void probs_fragment(const float (&s)[NT][4], int kk, uint32_t (&pf)[4]) {
  pf[0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
  pf[1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
  pf[2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  pf[3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// All of a tile's P fragments (keys 16 kk .. 16 kk + 15 for each kk), converted before the wgmma
// fence that precedes the P V products: registers written between the fence and an RS wgmma make
// ptxas inject fences of its own and serialize the wgmma (warnings C7519/C7520).
template <int NT>
__device__ __forceinline__ void probs_fragments(const float (&s)[NT][4], uint32_t (&pf)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) probs_fragment(s, kk, pf[kk]);
}

// The 4 x 4 transpose of 32-bit words across the 4 lanes of a quad: lane t's a[j] becomes lane j's
// a[t] (two rounds of paired exchanges, 4 shuffles). store_rows uses it to turn the accumulator
// layout's 4-byte pieces (lane t: columns 2t, 2t + 1 of each 8-column group) into 16-byte ones
// (lane t: the 8 columns of group t of 4).
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4], int lane) {
  const bool b0 = lane & 1, b1 = lane & 2;
  uint32_t y0 = __shfl_xor_sync(0xffffffffu, b0 ? a[0] : a[1], 1);
  uint32_t y1 = __shfl_xor_sync(0xffffffffu, b0 ? a[2] : a[3], 1);
  if (b0) {
    a[0] = y0, a[2] = y1;
  } else {
    a[1] = y0, a[3] = y1;
  }
  y0 = __shfl_xor_sync(0xffffffffu, b1 ? a[0] : a[2], 2);
  y1 = __shfl_xor_sync(0xffffffffu, b1 ? a[1] : a[3], 2);
  if (b1) {
    a[0] = y0, a[1] = y1;
  } else {
    a[2] = y0, a[3] = y1;
  }
}

// Writes the warp's rows r (this lane's g and g + 8 of the 16 at row0) of O / l: row r is token
// tok0 + r / G of query head h * G + r % G; rows >= rows are padding. Where the head has a multiple
// of 32 dims, the quad's pieces are first regrouped (quad_transpose) so each lane stores 16 bytes
// and a warp's store fills whole 32-byte sectors (8 stores a lane instead of 32): the output stores,
// 4 bytes each straight from the accumulator layout, took ~16% of the TMA kernel's time on an
// embedding step's 512-token prompts (bench/RESULTS.md: "prefill attention's output stores").
template <int DT>
__device__ __forceinline__ void store_rows(const float (&o)[DT][4], const float (&l)[2], int row0, int rows, int G,
                                           int h, int64_t tok_base, int64_t ostride, bf16* out, int lane) {
  constexpr int D = DT * 8;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float lsum = l[hf];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const int r = row0 + (lane >> 2) + 8 * hf;
    const float inv = 1.f / lsum;
    bf16* orow = out + (tok_base + r / G) * ostride + int64_t(h * G + r % G) * D;
    if constexpr (DT % 4 == 0) {
#pragma unroll
      for (int i0 = 0; i0 < DT; i0 += 4) {
        uint32_t a[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) a[j] = pack_bf16x2(o[i0 + j][2 * hf] * inv, o[i0 + j][2 * hf + 1] * inv);
        quad_transpose(a, lane);  // every lane, padding rows included (shuffles)
        if (r < rows) *reinterpret_cast<uint4*>(orow + (i0 + (lane & 3)) * 8) = make_uint4(a[0], a[1], a[2], a[3]);
      }
    } else {
      if (r >= rows) continue;
#pragma unroll
      for (int i = 0; i < DT; ++i)
        *reinterpret_cast<bf162*>(orow + i * 8 + (lane & 3) * 2) =
            __floats2bfloat162_rn(o[i][2 * hf] * inv, o[i][2 * hf + 1] * inv);
    }
  }
}

}  // namespace nanovllm::cuda
