// The sampler's optional passes, for the rows that ask (logits_kernels.h).
//   process_logits: grid (row, column slice): the row converted to F32 into out [B, V] (-inf where the row's
//     structured-output mask, if it has one, does not allow the token: the mask costs no pass of
//     its own), then, for a row with entries, each entry's token (distinct within the row)
//     adjusted by vLLM V1's formulas
//     (backends/logits_processing.h): -inf when banned (min_tokens), + bias, repetition scaling when
//     seen in the prompt or output, - frequency * count, - presence when in the output.
//   logprobs: one CTA per asking row: x_i = logit_i * scale; max by block argmax (which is also the
//     top-1), lse = max + log(sum exp(x_i - max)) (double sum); the sampled token's x - lse and rank
//     (1 + the entries above it, one counting pass); the
//     top N as N successive block argmaxes, each over the entries that come after the previous one
//     in (value desc, index asc) order: no sort, no scratch, N + 2 passes over the row.
#include <algorithm>
#include <cfloat>

#include "nanovllm/backends/cuda/logits_kernels.h"
#include "nanovllm/backends/cuda/sampler_reduce.cuh"
#include "nanovllm/backends/logits_processing.h"

namespace nanovllm::cuda {

constexpr int kRowThreads = 1024;

// Grid (B, S): block (b, y) copies columns [y * slice, (y + 1) * slice) of row b (masked: -inf where
// the row's bitmask clears the token), then applies the row's entries that fall in those columns.
// A row is split over S blocks so that a small batch still spreads over the SMs (one block per row
// left 150K logits to one SM: ~10% of a batch-1 decode step under a grammar).
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    process_logits_kernel(const T* __restrict__ logits, int64_t V, int64_t slice, const DevPenalties* __restrict__ rows,
                          const LogitAdjust* __restrict__ entries, const uint32_t* __restrict__ masks,
                          float* __restrict__ out) {
  pdl_begin();
  const int64_t b = blockIdx.x;
  const int64_t lo = int64_t(blockIdx.y) * slice, hi = lo + slice < V ? lo + slice : V;
  const T* src = logits + b * V;
  float* dst = out + b * V;
  const DevPenalties r = rows[b];
  if (r.mask >= 0) {
    const uint32_t* allowed = masks + int64_t(r.mask) * ((V + 31) / 32);
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
      dst[i] = token_allowed(allowed, i) ? ld(src, i) : -INFINITY;
  } else {
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = ld(src, i);
  }
  if (r.begin == r.end) return;
  __syncthreads();  // the copies above are visible to the whole block
  const float inv_rep = 1.0f / r.repetition;
  for (int32_t e = r.begin + int32_t(threadIdx.x); e < r.end; e += int32_t(blockDim.x)) {
    const LogitAdjust a = entries[e];
    if (a.token < lo || a.token >= hi) continue;  // another block's columns (range checked on the host)
    dst[a.token] = adjust_logit(dst[a.token], a, r.repetition, inv_rep, r.frequency, r.presence);
  }
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    logprobs_kernel(const T* __restrict__ raw, const float* __restrict__ processed, int64_t V,
                    const DevLogprobRow* __restrict__ rows, const int32_t* __restrict__ tokens, float* __restrict__ out,
                    int64_t stride) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ double sd[32];
  pdl_begin();
  const DevLogprobRow r = rows[blockIdx.x];
  const int64_t base = int64_t(r.row) * V;
  auto x = [&](int64_t i) { return (r.processed ? processed[base + i] : ld(raw, base + i)) * r.scale; };
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = x(i);
    if (v > bv || bi == 0x7fffffff) {
      bv = v;
      bi = int(i);
    }
  }
  block_argmax(bv, bi, sv, si);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) sum += exp(double(x(i)) - double(bv));
  sum = block_sum_d(sum, sd);
  const double lse = double(bv) + log(sum);
  float* o = out + int64_t(blockIdx.x) * stride;
  const float xt = x(tokens[r.row]);
  float above = 0;  // entries larger than the token's: its rank - 1 (exact in float below 2^24)
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) above += x(i) > xt ? 1.f : 0.f;
  above = block_sum(above, sv);
  if (threadIdx.x == 0) {
    o[0] = float(double(xt) - lse);
    o[1] = above + 1.f;
  }
  float pv = bv;
  int pi = bi;
  for (int k = 0; k < r.n && k < V; ++k) {
    if (k > 0) {  // the next entry after (pv, pi) in (value desc, index asc) order
      float cv = -INFINITY;
      int ci = 0x7fffffff;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float v = x(i);
        const bool after = v < pv || (v == pv && int(i) > pi);
        if (after && (v > cv || ci == 0x7fffffff)) {
          cv = v;
          ci = int(i);
        }
      }
      block_argmax(cv, ci, sv, si);
      pv = cv;
      pi = ci;
    }
    if (threadIdx.x == 0) {
      o[2 + 2 * k] = __int_as_float(pi);
      o[3 + 2 * k] = float(double(pv) - lse);
    }
  }
}

void launch_process_logits(const void* logits, DType dtype, int64_t B, int64_t V, const DevPenalties* rows,
                           const void* entries, const uint32_t* masks, float* out, Stream st) {
  auto* e = static_cast<const LogitAdjust*>(entries);
  // Column slices of >= 8K logits, enough of them for ~2 blocks per SM of an H100/H200 over the batch.
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>((V + 8191) / 8192, (264 + B - 1) / B));
  const int64_t slice = ((V + splits - 1) / splits + 31) / 32 * 32;
  const dim3 grid(unsigned(B), unsigned((V + slice - 1) / slice));
  if (dtype == DType::F32)
    launch(process_logits_kernel<float>, grid, kRowThreads, 0, st, static_cast<const float*>(logits), V, slice, rows, e,
           masks, out);
  else
    launch(process_logits_kernel<bf16>, grid, kRowThreads, 0, st, static_cast<const bf16*>(logits), V, slice, rows, e,
           masks, out);
}

void launch_logprobs(const void* raw, DType dtype, const float* processed, int64_t V, const DevLogprobRow* rows,
                     int64_t R, const int32_t* tokens, float* out, int64_t max_n, Stream st) {
  const int64_t stride = 2 + 2 * max_n;
  if (dtype == DType::F32)
    launch(logprobs_kernel<float>, unsigned(R), kRowThreads, 0, st, static_cast<const float*>(raw), processed, V, rows,
           tokens, out, stride);
  else
    launch(logprobs_kernel<bf16>, unsigned(R), kRowThreads, 0, st, static_cast<const bf16*>(raw), processed, V, rows,
           tokens, out, stride);
}

}  // namespace nanovllm::cuda
