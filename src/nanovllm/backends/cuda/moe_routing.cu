// Mixture-of-experts routing on the GPU: the router's top-k (the op moe_topk) and the grouping of
// the chosen (token, expert) pairs by expert that the grouped GEMMs of moe_gemm.cu read.
//
// moe_topk_kernel: logits [T, E] (F32 or BF16) -> weights [T, k] F32, ids [T, k] I32. One warp per
//   token (4 per 128-thread CTA, grid ceil(T / 4)); the lanes stride over the E experts. Softmax
//   with warp max / sum reductions, then k rounds of a warp arg-max, each over the experts ranked
//   below the previous pick in the order (probability descending, index ascending): no scratch
//   marks, no sort, any E and k. Probabilities are recomputed from the logits in each round with
//   the same expression, so the comparisons are consistent. Why a warp per token: E = 128 is four
//   values per lane, and the top-8 loop is a handful of shuffles per round; decode's few tokens
//   stay one CTA. Same order and renormalization as the CPU oracle (cpu_moe.cpp).
//
// moe_align_kernel (as vLLM's moe_align_block_size): ids [T * k] -> the pairs sorted by expert,
//   each expert's run padded to a multiple of kMoeBlockM rows, so that each M-tile of the grouped
//   GEMM belongs to one expert:
//     sorted_pairs [max_tiles * kMoeBlockM]: the pair index t * k + j of each row, or T * k (padding);
//     tile_expert [max_tiles]: the expert of each M-tile, -1 for tiles past the last real one;
//     pair_row [T * k]: the row each pair landed on (-1: an out-of-range expert id, ignored), for
//     the combine.
//   One CTA of 1024 threads: per-expert counts by shared-memory atomics, a serial scan of the
//   padded counts (E <= kMoeMaxExperts = 1024 steps, a few microseconds), then each pair scattered
//   to its expert's next free row. Rows within an expert come out in atomic order; that changes
//   nothing in the results (GEMM rows are independent and the combine reads each token's pairs in
//   j order), so outputs are deterministic. max_tiles = floor(T k / kMoeBlockM) + min(E, T k)
//   bounds the real tiles for any routing, so the grid is fixed by (T, k, E): no host sync, CUDA
//   graph safe; the GEMM CTAs of tiles past the real count exit at once.
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/moe.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

using namespace cuda;

namespace {

__device__ __forceinline__ float logit_at(const void* logits, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(logits)[i] : __bfloat162float(static_cast<const bf16*>(logits)[i]);
}

// (p, e) ranks before (bp, be): higher probability, or equal and a lower index.
__device__ __forceinline__ bool ranks_before(float p, int e, float bp, int be) { return p > bp || (p == bp && e < be); }

__global__ void __launch_bounds__(128)
    moe_topk_kernel(const void* __restrict__ logits, bool f32, int T, int E, int K, bool renormalize,
                    float* __restrict__ weights, int32_t* __restrict__ ids) {
  pdl_begin();
  const int t = blockIdx.x * 4 + int(threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (t >= T) return;
  const int64_t base = int64_t(t) * E;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, logit_at(logits, f32, base + e));
  mx = warp_max(mx);
  float sum = 0;
  for (int e = lane; e < E; e += 32) sum += expf(logit_at(logits, f32, base + e) - mx);
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  float prev_p = INFINITY, chosen = 0;
  int prev_e = -1;
  for (int j = 0; j < K; ++j) {
    float bp = -1;
    int be = E;
    for (int e = lane; e < E; e += 32) {
      const float p = expf(logit_at(logits, f32, base + e) - mx) * inv;
      if (ranks_before(prev_p, prev_e, p, e) && ranks_before(p, e, bp, be)) bp = p, be = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oe = __shfl_xor_sync(0xffffffffu, be, o);
      if (ranks_before(op, oe, bp, be)) bp = op, be = oe;
    }
    if (lane == 0) {
      weights[int64_t(t) * K + j] = bp;
      ids[int64_t(t) * K + j] = be;
    }
    chosen += bp;
    prev_p = bp, prev_e = be;
  }
  if (renormalize && lane == 0)
    for (int j = 0; j < K; ++j) weights[int64_t(t) * K + j] /= chosen;
}

__global__ void __launch_bounds__(1024)
    moe_align_kernel(const int32_t* __restrict__ ids, int TK, int E, int max_tiles, int32_t* __restrict__ sorted_pairs,
                     int32_t* __restrict__ tile_expert, int32_t* __restrict__ pair_row) {
  __shared__ int count[kMoeMaxExperts], start[kMoeMaxExperts + 1], fill[kMoeMaxExperts];
  pdl_begin();
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int e = tid; e < E; e += nt) count[e] = fill[e] = 0;
  __syncthreads();
  for (int i = tid; i < TK; i += nt) {
    const int e = ids[i];
    if (e >= 0 && e < E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int s = 0;
    for (int e = 0; e < E; ++e) {
      start[e] = s;
      s += (count[e] + kMoeBlockM - 1) / kMoeBlockM * kMoeBlockM;
    }
    start[E] = s;
  }
  __syncthreads();
  const int total = start[E];
  for (int tile = tid; tile < max_tiles; tile += nt) {
    const int row = tile * kMoeBlockM;
    int e = -1;
    if (row < total) {  // the last expert whose run starts at or before row
      int lo = 0, hi = E - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (start[mid] <= row)
          lo = mid;
        else
          hi = mid - 1;
      }
      e = lo;
    }
    tile_expert[tile] = e;
  }
  for (int r = tid; r < max_tiles * kMoeBlockM; r += nt) sorted_pairs[r] = TK;
  __syncthreads();
  for (int i = tid; i < TK; i += nt) {
    const int e = ids[i];
    if (e < 0 || e >= E) {
      pair_row[i] = -1;
      continue;
    }
    const int row = start[e] + atomicAdd(&fill[e], 1);
    sorted_pairs[row] = i;
    pair_row[i] = row;
  }
}

}  // namespace

void CudaBackend::moe_topk(const Tensor& logits, int64_t top_k, bool renormalize, Tensor& weights, Tensor& ids) {
  check_moe_topk(logits, top_k, weights, ids);
  if (logits.dtype() != DType::F32 && logits.dtype() != DType::BF16)
    throw Error("moe_topk: logits must be F32 or BF16");
  const int64_t T = logits.size(0), E = logits.size(1);
  if (T == 0) return;
  launch(moe_topk_kernel, dim3(ceil_div(T, 4)), dim3(128), 0, on_stream(), logits.raw(), logits.dtype() == DType::F32,
         int(T), int(E), int(top_k), renormalize, weights.data<float>(), ids.data<int32_t>());
}

namespace cuda {

int64_t moe_max_tiles(int64_t num_pairs, int64_t num_experts) {
  return num_pairs / kMoeBlockM + std::min(num_experts, num_pairs);
}

void moe_align(const Tensor& ids, int64_t num_experts, Tensor& sorted_pairs, Tensor& tile_expert, Tensor& pair_row,
               Stream st) {
  const int64_t TK = ids.numel(), max_tiles = moe_max_tiles(TK, num_experts);
  if (num_experts > kMoeMaxExperts)
    throw Error("moe_experts: " + std::to_string(num_experts) + " experts, the CUDA kernels take at most " +
                std::to_string(kMoeMaxExperts));
  if (sorted_pairs.numel() != max_tiles * kMoeBlockM || tile_expert.numel() != max_tiles || pair_row.numel() != TK)
    throw Error("moe_align: scratch sizes do not match moe_max_tiles");
  launch(moe_align_kernel, dim3(1), dim3(1024), 0, st, ids.data<int32_t>(), int(TK), int(num_experts), int(max_tiles),
         sorted_pairs.data<int32_t>(), tile_expert.data<int32_t>(), pair_row.data<int32_t>());
}

}  // namespace cuda

}  // namespace nanovllm
