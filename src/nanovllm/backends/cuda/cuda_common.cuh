// Shared helpers of the CUDA kernels: error checks that throw nanovllm::Error with the call site,
// BF16 conversions, warp/block reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "nanovllm/backends/cuda/kernel_plan.h"  // GemvShape
#include "nanovllm/utils/error.h"

namespace nanovllm::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line);

}  // namespace nanovllm::cuda

#define NV_CUDA_CHECK(x)                                                                             \
  do {                                                                                               \
    cudaError_t nv_err_ = (x);                                                                       \
    if (nv_err_ != cudaSuccess) ::nanovllm::cuda::throw_cuda_error(nv_err_, #x, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: reports bad launch configurations (asynchronous faults surface later).
#define NV_LAUNCH_CHECK() NV_CUDA_CHECK(cudaGetLastError())

namespace nanovllm::cuda {

using bf16 = __nv_bfloat16;
using bf162 = __nv_bfloat162;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `red` is shared scratch of 32 floats; the call contains __syncthreads().
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : 0.0f;
  return warp_sum(v);
}

// Programmatic dependent launch (Hopper+). Kernels launched by launch() below may be scheduled
// while the previous kernel of the stream is still running, so every kernel of this backend
// begins with pdl_begin(): wait until the predecessor grid has completed and its writes are
// visible (griddepcontrol.wait), then let our own successor be scheduled (launch_dependents).
// What this buys: the successor's launch and CTA set-up overlap our run, instead of a gap of a
// few microseconds between dependent kernels; that gap dominates decode at small batch, where a
// step is ~300 kernels of a few microseconds each. Both instructions are no-ops for a kernel
// launched without the attribute, and compile to nothing before sm_90.
// Before pdl_begin() a kernel may read what the previous kernel cannot have written: weights, the
// step's uploaded inputs (positions, slots, block tables, lengths) and KV-cache rows of earlier
// steps. (Anything written two launches back is complete: our predecessor let us start only
// after its own wait returned; the one exception, the q/k norm + RoPE kernels (qk_norm_rope.cu,
// qk_norm_rope_tokens.cu), trigger before their wait, and their successor reads nothing of the step
// before its own.) The GEMV, q/k norm + RoPE and
// decode attention kernels start their DRAM loads there, so that latency overlaps the previous
// kernel's tail.
//
// The two halves, for kernels that place them apart: pdl_wait() waits for the predecessor grid and
// its writes; pdl_trigger() lets our successor be scheduled now (its own wait still waits for our
// completion and writes).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}

// Asks for the 128-byte line at p to be brought into L2 (no register holds the data).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Every pointer 16-byte aligned (what 16-byte vector loads, TMA and bulk copies need).
inline bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Up to 4 byte ranges (weights a later kernel reads) to bring into L2 now. CTA `part` of a grid
// of `parts` takes one equal 128-byte-aligned slice of their concatenation and thread 0 asks for
// it with bulk prefetches (cp.async.bulk.prefetch.L2: the TMA unit fetches; no register or
// shared memory holds the data, and the CTA need not wait). sm_90+; nothing before.
struct L2ReadAhead {
  const char* ptr[4] = {};
  int64_t bytes[4] = {};  // multiples of 16 (the bulk copy's unit); ptr 16-byte aligned
  int n = 0;
};

__device__ __forceinline__ void read_ahead_l2(const L2ReadAhead& r, int64_t part, int64_t parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (r.n == 0 || threadIdx.x != 0) return;
  int64_t total = 0;
  for (int i = 0; i < r.n; ++i) total += r.bytes[i];
  const int64_t per = ((total + parts - 1) / parts + 127) & ~int64_t(127);
  const int64_t lo = part * per, hi = min(total, lo + per);
  int64_t base = 0;  // where range i starts in the concatenation
  for (int i = 0; i < r.n; ++i) {
    const int64_t a = max(lo, base), b = min(hi, base + r.bytes[i]);
    if (a < b)  // a slice is far below the instruction's 4 GiB limit
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(r.ptr[i] + (a - base)), "r"(uint32_t(b - a))
                   : "memory");
    base += r.bytes[i];
  }
#endif
}

// Where a kernel runs: the backend's stream, and whether to launch with PDL (sm_90+ only).
struct Stream {
  cudaStream_t stream;
  bool pdl;
};

// kernel<<<grid, block, smem, st.stream>>>(args...), with the PDL attribute when st.pdl, as
// thread-block clusters of `cluster` CTAs when that is more than one (sm_90+).
template <typename... KArgs, typename... Args>
void launch_clustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Stream st, dim3 cluster,
                      Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st.stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (st.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  NV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, KArgs(args)...));
}

// The thread-block clusters of `cluster` CTAs (along x) of `kernel`, with `block` threads and `smem`
// bytes of dynamic shared memory a CTA, that the device holds at once (0: none fits).
template <typename... KArgs>
int max_active_clusters(void (*kernel)(KArgs...), unsigned cluster, unsigned block, size_t smem) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cluster);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  NV_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
  return clusters;
}

// kernel<<<grid, block, smem, st.stream>>>(args...), with the PDL attribute when st.pdl.
template <typename... KArgs, typename... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Stream st, Args... args) {
  launch_clustered(kernel, grid, block, smem, st, dim3(1, 1, 1), args...);
}

// f(std::integral_constant<int, M>{}) for the batch M (1..MaxM; larger: MaxM): for kernels whose
// row count is a template (the GEMVs of gemv.cu and fp8_linear.cu).
template <int MaxM, class F>
void with_batch(int64_t M, F&& f) {
  if constexpr (MaxM > 1)
    if (M < MaxM) return with_batch<MaxM - 1>(M, f);
  f(std::integral_constant<int, MaxM>{});
}

// x rounded to BF16 and back: marks the points where a BF16 model rounds an intermediate.
__device__ __forceinline__ float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

// silu(g) = g / (1 + e^-g) of a gate already rounded to BF16, rounded to BF16 as act_fn(gate_proj(x))
// is in a BF16 model. Every gated-MLP path (silu_and_mul, the GEMVs' SiLU epilogues, gemm_wgmma's
// fused gate_up) computes it with this one formula, so the fused and unfused paths agree bit for
// bit. __expf and __fdividef (ex2.approx and rcp.approx: ~5 instructions where expf and an IEEE
// division take ~25, which made gemm_wgmma's fused epilogue cost more than the silu_and_mul
// kernel it removes): their ~2^-20 relative error changes the BF16 result about once in 4,000.
__device__ __forceinline__ float silu_bf16(float g) { return bf16_round(__fdividef(g, 1.0f + __expf(-g))); }

// 8 bf16 <-> 8 floats through one 16-byte word.
__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const bf162* h = reinterpret_cast<const bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 u;
  bf162* h = reinterpret_cast<bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}

// The add + RMSNorm prologues of the GEMVs (gemv.cu, int_gemv_norm.cuh) on 8 values a 16-byte word,
// with add_rms_norm's rounding: h = bf16(x + r), ss += h^2 (F32, in element order), h returned
// (exact: already BF16); then bf16(bf16(h * inv) * w).
__device__ __forceinline__ uint4 add8_sumsq(const uint4& x, const uint4& r, float& ss) {
  float a[8], b[8];
  unpack8(x, a);
  unpack8(r, b);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    a[e] = bf16_round(a[e] + b[e]);
    ss += a[e] * a[e];
  }
  return pack8(a);
}
__device__ __forceinline__ uint4 rms_scale8(const uint4& h, const uint4& w, float inv) {
  float a[8], g[8];
  unpack8(h, a);
  unpack8(w, g);
#pragma unroll
  for (int e = 0; e < 8; ++e) a[e] = bf16_round(a[e] * inv) * g[e];
  return pack8(a);
}

// The add + RMSNorm prologue of a GEMV (gemv.cu): residual_out = residual + x, and the GEMV
// multiplies rms_norm(residual_out) * norm_w instead of x. residual, residual_out: [M, K]
// (distinct buffers); norm_w: [K].
struct GemvNorm {
  const bf16* residual = nullptr;
  bf16* residual_out = nullptr;
  const bf16* norm_w = nullptr;
  float eps = 0.f;
};

// CTAs of the norm-prologue GEMV for (M, K, silu_mul) that the GPU holds at once (one wave).
int64_t gemv_norm_wave(int64_t M, int64_t K, bool silu_mul, int num_sms);

// out[M, N] = x[M, K] @ w[N, K]^T (BF16, FP32 accumulation) by the skinny kernel of gemv.cu, on
// `st`; with silu_mul, w has 2N rows [gate; up] and out[M, N] = silu(x Wg^T) * (x Wu^T); with
// f32_out, out is F32 (no rounding); with norm, x is first added to the residual and normalized;
// in CTAs of `shape` (plan_linear's). Called only where plan_linear (kernel_plan.h) chose it; a call
// outside the kernel's limits (stated there) is a bug and throws Error.
void gemv_bf16(const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, Stream st,
               bool silu_mul = false, bool f32_out = false, const GemvNorm* norm = nullptr, GemvShape shape = {});

inline unsigned ceil_div(int64_t a, int64_t b) { return unsigned((a + b - 1) / b); }

}  // namespace nanovllm::cuda
