// The all-reduce of F32 partial sums fused with the residual add + RMSNorm after it: the same
// arithmetic as the all-reduce, cast to BF16, then elementwise.cu's rms_norm_kernel<true>, per row t:
//   s = bf16(sum over ranks of partial[t], in rank order); residual[t] = bf16(residual[t] + s);
//   out[t] = bf16(bf16(residual[t] * rsqrt(mean(residual[t]^2) + eps)) * w).
// partial, residual, out: [T, H]; w: [H]. A block owns whole rows. Threads take 8-element groups
// i = tid + k * blockDim (k < kV) as rms_norm_kernel does, with the same block size, so the sum of
// squares adds in the same order: bit-identical to the unfused ops, and on every rank.
// Two exchanges, by size (buffers and counters in p2p_all_reduce.cuh):
//  * LL (T * H * 4 <= P2pAllReduce::kMaxBytes: decode at batch <= 4 for H = 4096): NCCL's "LL"
//    protocol. Each rank pushes its floats into every peer's buffer as 16-byte lines {x0, e, x1, e}
//    whose two 8-byte halves each land whole, so a reader that sees the call number e in both
//    halves has the data: no fence, no separate flag, one NVLink crossing. 8 blocks.
//  * Bulk (up to kBulkBlocks * kBulkSlab bytes: decode batches up to 512 at H = 4096): LL lines
//    are half flags, too many bytes here. Each of up to 128 blocks pushes its rows' plain floats
//    into every peer's slab for that block, then fences and raises one flag per peer
//    (exchange_flags), and sums once the peers' flags are up. NCCL's ring alone, before the cast
//    and norm kernels, took a fifth of a Qwen3-8B TP=2 decode step at batch 256 (bench/RESULTS.md:
//    "NCCL all-reduce of the F32 partial sums").
#include "nanovllm/backends/cuda/collectives/p2p_all_reduce.cuh"

#include <algorithm>

namespace nanovllm::p2p {

using namespace cuda;

namespace {

// This thread's 8-element groups i = tid + k * blockDim (k < kV) of a BF16 row of H.
template <int kV>
__device__ __forceinline__ void load_groups(const bf16* row, int H, uint4 (&v)[kV]) {
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int i = threadIdx.x + k * int(blockDim.x);
    if (i < H / 8) v[k] = reinterpret_cast<const uint4*>(row)[i];
  }
}

// Row t's tail, once acc holds its rank-order sum (this thread's groups): residual add, RMSNorm,
// stores. res_pre: the row's residual groups loaded earlier, or null to load them here.
template <int kV>
__device__ __forceinline__ void finish_row(float (&acc)[kV][8], int t, int H, bf16* residual, const uint4 (&wv)[kV],
                                           const uint4* res_pre, bf16* out, float eps, float* red) {
  const int groups = H / 8;
  float a[kV][8];
  float ss = 0.f;
  bf16* rr = residual + size_t(t) * H;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int i = threadIdx.x + k * int(blockDim.x);
    if (i >= groups) continue;
    float res[8];
    unpack8(res_pre ? res_pre[k] : reinterpret_cast<const uint4*>(rr)[i], res);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[k][j] = bf16_round(bf16_round(acc[k][j]) + res[j]);
    reinterpret_cast<uint4*>(rr)[i] = pack8(a[k]);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += a[k][j] * a[k][j];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / float(H) + eps);
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int i = threadIdx.x + k * int(blockDim.x);
    if (i >= groups) continue;
    float ww[8];
    unpack8(wv[k], ww);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[k][j] = bf16_round(a[k][j] * inv) * ww[j];
    reinterpret_cast<uint4*>(out + size_t(t) * H)[i] = pack8(a[k]);
  }
}

// LL: block b owns rows b, b + kBlocks, ... (every block counts every call, rows or not, as the
// plain kernel does: they share counters). Lines alternate halves by call parity; lines of call
// e - 2 carry another number.
template <int kWorld, int kV>
__global__ void __launch_bounds__(512)
    ll_add_rms_norm_kernel(const float* __restrict__ partial, int T, int H, bf16* __restrict__ residual,
                           const bf16* __restrict__ w, bf16* __restrict__ out, float eps, Peers P, int rank) {
  __shared__ uint32_t s_epoch;
  __shared__ float red[32];
  const int b = blockIdx.x, tid = threadIdx.x, groups = H / 8;
  // Before the wait on the GEMV that writes `partial`: the call number, the norm weights and the
  // block's first residual row (written by the fused call before that GEMV), off the critical path.
  const uint32_t e = claim_call(P, rank, kEpochsOff, &s_epoch);
  uint4 wv[kV], rv[kV];
  if (b < T) {
    load_groups<kV>(w, H, wv);
    load_groups<kV>(residual + size_t(b) * H, H, rv);
  }
  pdl_begin();
  const size_t half = kLLOff + size_t(e & 1) * kLLHalf;
  for (int t = b; t < T; t += kBlocks) {
    const size_t line0 = size_t(t) * (H / 2);  // row t's first line in a source's slot
    // Push: thread tid sends lines tid, tid + blockDim, ..., so each warp store covers 512
    // contiguous bytes (a line per lane: whole 32-byte sectors over NVLink, not half-sectors).
    const float2* prow = reinterpret_cast<const float2*>(partial + size_t(t) * H);
#pragma unroll
    for (int m = 0; m < 4 * kV; ++m) {
      const int L = tid + m * int(blockDim.x);
      if (L >= H / 2) break;
      const float2 x = prow[L];
#pragma unroll
      for (int r = 0; r < kWorld; ++r) {
        if (r == rank) continue;
        uint4* dst = reinterpret_cast<uint4*>(P.base[r] + half + size_t(rank) * kLLSlot) + line0 + L;
        store_volatile(dst, make_uint4(__float_as_uint(x.x), e, __float_as_uint(x.y), e));
      }
    }
    float mine[kV][8];  // this rank's own groups, in the norm's layout (lines 4i..4i+3 = group i)
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const int i = tid + k * int(blockDim.x);
      if (i >= groups) continue;
      const float4 lo = reinterpret_cast<const float4*>(partial + size_t(t) * H)[2 * i];
      const float4 hi = reinterpret_cast<const float4*>(partial + size_t(t) * H)[2 * i + 1];
      const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) mine[k][j] = f[j];
    }
    float acc[kV][8] = {};
#pragma unroll 1
    for (int r = 0; r < kWorld; ++r) {  // rank order: every rank adds the same values the same way
      if (r == rank) {
#pragma unroll
        for (int k = 0; k < kV; ++k)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[k][j] += mine[k][j];
        continue;
      }
      const uint4* src = reinterpret_cast<const uint4*>(P.base[rank] + half + size_t(r) * kLLSlot) + line0;
      uint4 ln[kV][4];
      const uint64_t t0 = global_ns();
      for (bool all = false; !all;) {  // every line of this source loaded at once, until all are there
        all = true;
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          const int i = tid + k * int(blockDim.x);
          if (i >= groups) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            ln[k][j] = load_volatile(src + size_t(i) * 4 + j);
            all = all && ln[k][j].y == e && ln[k][j].w == e;
          }
        }
        if (!all && global_ns() - t0 > 30ull * 1000 * 1000 * 1000) __trap();  // a peer is gone
      }
#pragma unroll
      for (int k = 0; k < kV; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[k][2 * j] += __uint_as_float(ln[k][j].x);
          acc[k][2 * j + 1] += __uint_as_float(ln[k][j].z);
        }
    }
    finish_row<kV>(acc, t, H, residual, wv, t == b ? rv : nullptr, out, eps, red);
  }
}

// Bulk: a grid of min(T, kBulkBlocks) blocks; block b owns rows b + j * kBulkBlocks, whose floats
// source s pushes to [half][s][b] + j * H * 4 in each peer's allocation. The slab of block b is
// the same for every call, so the double buffering holds per block: a peer pushes call e + 2 into
// this half only after this block's flag of call e + 1, raised after its reads of call e. (Block
// b is not launched for a call of T <= b rows: its counter counts only the calls it takes part
// in, alike on every rank, and the argument holds in that numbering.)
template <int kWorld, int kV>
__global__ void __launch_bounds__(512)
    bulk_add_rms_norm_kernel(const float* __restrict__ partial, int T, int H, bf16* __restrict__ residual,
                             const bf16* __restrict__ w, bf16* __restrict__ out, float eps, Peers P, int rank) {
  __shared__ uint32_t s_epoch;
  __shared__ float red[32];
  const int b = blockIdx.x, tid = threadIdx.x, groups = H / 8;
  const uint32_t e = claim_call(P, rank, kBulkEpochsOff, &s_epoch);
  uint4 wv[kV];
  load_groups<kV>(w, H, wv);
  pdl_begin();
  auto slab = [&](int at, int src) {  // block b's slab from `src` in rank `at`'s allocation
    return reinterpret_cast<float4*>(P.base[at] + kBulkDataOff +
                                     ((size_t(e & 1) * kWorld + src) * kBulkBlocks + b) * kBulkSlab);
  };
  // Push this rank's rows to every peer; float4 q = tid + m * blockDim, so each warp store
  // covers 512 contiguous bytes (whole 32-byte sectors over NVLink).
  for (int t = b, j = 0; t < T; t += kBulkBlocks, ++j) {
    const float4* prow = reinterpret_cast<const float4*>(partial + size_t(t) * H);
#pragma unroll
    for (int m = 0; m < 2 * kV; ++m) {
      const int q = tid + m * int(blockDim.x);
      if (q >= H / 4) break;
      const float4 x = prow[q];
#pragma unroll
      for (int r = 0; r < kWorld; ++r)
        if (r != rank) slab(r, rank)[size_t(j) * (H / 4) + q] = x;
    }
  }
  exchange_flags(P, rank, kWorld, e, kBulkFlagsOff);  // fences the pushes, then waits for the peers'
  for (int t = b, j = 0; t < T; t += kBulkBlocks, ++j) {
    float acc[kV][8] = {};
#pragma unroll 1
    for (int r = 0; r < kWorld; ++r) {  // rank order: every rank adds the same values the same way
      const float4* src =
          r == rank ? reinterpret_cast<const float4*>(partial + size_t(t) * H) : slab(rank, r) + size_t(j) * (H / 4);
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int i = tid + k * int(blockDim.x);
        if (i >= groups) continue;
        const float4 lo = __ldcg(src + 2 * i), hi = __ldcg(src + 2 * i + 1);  // L2: peers wrote it
        const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[k][q] += f[q];
      }
    }
    finish_row<kV>(acc, t, H, residual, wv, nullptr, out, eps, red);
  }
}

// elementwise.cu's rms_norm_kernel block size for a row of H (the fused kernels must match it).
int norm_row_threads(int64_t H) { return H >= 4096 ? 512 : H >= 1024 ? 256 : 128; }

template <int kWorld, int kV>
void launch_kernel(bool bulk, cuda::Stream st, const float* partial, int T, int H, bf16* residual, const bf16* w,
                   bf16* out, float eps, const Peers& P, int rank) {
  const int threads = norm_row_threads(H);
  if (bulk)
    cuda::launch(bulk_add_rms_norm_kernel<kWorld, kV>, std::min(T, kBulkBlocks), threads, 0, st, partial, T, H,
                 residual, w, out, eps, P, rank);
  else
    cuda::launch(ll_add_rms_norm_kernel<kWorld, kV>, kBlocks, threads, 0, st, partial, T, H, residual, w, out, eps, P,
                 rank);
}

template <int kWorld>
bool launch_world(int kv, bool bulk, cuda::Stream st, const float* partial, int T, int H, bf16* residual, const bf16* w,
                  bf16* out, float eps, const Peers& P, int rank) {
  if (kv == 1)
    launch_kernel<kWorld, 1>(bulk, st, partial, T, H, residual, w, out, eps, P, rank);
  else if (kv == 2)
    launch_kernel<kWorld, 2>(bulk, st, partial, T, H, residual, w, out, eps, P, rank);
  else
    return false;
  return true;
}

}  // namespace

int bulk_resident_blocks(int world, int device) {
  int sms = 0, least = 1 << 30;
  NV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto occ = [&](auto kernel) {
    for (int threads : {128, 256, 512}) {  // norm_row_threads' sizes
      int per_sm = 0;
      NV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
      least = std::min(least, per_sm * sms);
    }
  };
  switch (world) {
    case 2: occ(bulk_add_rms_norm_kernel<2, 1>), occ(bulk_add_rms_norm_kernel<2, 2>); break;
    case 4: occ(bulk_add_rms_norm_kernel<4, 1>), occ(bulk_add_rms_norm_kernel<4, 2>); break;
    case 8: occ(bulk_add_rms_norm_kernel<8, 1>), occ(bulk_add_rms_norm_kernel<8, 2>); break;
    default: return 0;
  }
  return least;
}

bool launch_all_reduce_add_rms_norm(const Peers& P, int world, int rank, cuda::Stream st, int bulk_max_grid,
                                    const float* partial, int T, int H, bf16* residual, const bf16* w, float eps,
                                    bf16* out) {
  const int threads = norm_row_threads(H);
  const int kv = (H / 8 + threads - 1) / threads;  // 8-element groups per thread
  const size_t bytes = size_t(T) * size_t(H) * 4;
  bool bulk = false;
  if (bytes > P2pAllReduce::kMaxBytes) {
    const size_t rows_per_block = (size_t(T) + kBulkBlocks - 1) / kBulkBlocks;
    if (rows_per_block * size_t(H) * 4 > kBulkSlab || std::min(T, kBulkBlocks) > bulk_max_grid) return false;
    bulk = true;
  }
  switch (world) {
    case 2: return launch_world<2>(kv, bulk, st, partial, T, H, residual, w, out, eps, P, rank);
    case 4: return launch_world<4>(kv, bulk, st, partial, T, H, residual, w, out, eps, P, rank);
    case 8: return launch_world<8>(kv, bulk, st, partial, T, H, residual, w, out, eps, P, rank);
    default: return false;
  }
}

}  // namespace nanovllm::p2p
