// Hopper (sm_90a) asynchronous copies and their barriers, as inline PTX: the tensor memory
// accelerator (TMA: cp.async.bulk.tensor, one thread moves a whole 2D box from global to shared
// memory) and the shared-memory mbarriers that count its bytes in, as FlashAttention-3's producer
// warp uses them (attention_prefill_wgmma_tma.cu).
//
// An mbarrier completes a phase when its expected arrivals have arrived and its expected
// transaction bytes have landed; waiters poll the phase parity. A full/empty pair per pipeline
// stage: the producer arms "full" with the stage's bytes and issues the copies, which complete
// the transaction; consumers wait on "full", and arrive on "empty" once done with the stage; the
// producer waits on "empty" before it refills the stage.
//
// The TMA descriptor (CUtensorMap) is made on the host (make_tma_2d) and passed to the kernel as
// a __grid_constant__ parameter. The tiles it writes use the 128-byte swizzle of wgmma.cuh, so
// wgmma reads them directly.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda {

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#ifdef NANOVLLM_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}

// Makes barrier initialization visible to the async proxy (the TMA unit) before first use.
__device__ __forceinline__ void mbar_fence_init() {
#ifdef NANOVLLM_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also expects `bytes` more transaction bytes in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef NANOVLLM_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef NANOVLLM_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// mbar_arrive where `pred` holds, without a branch: a branch between warpgroup MMAs in flight makes
// ptxas wait for them first (C7518; int_gemm_wgmma_ss.cu).
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
#ifdef NANOVLLM_WGMMA
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(uint32_t(pred))
               : "memory");
#endif
}

// Waits until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#ifdef NANOVLLM_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}

// One poll of the phase with parity `parity`: true once it has completed. kCluster: acquire at
// cluster scope, for barriers that other CTAs of the cluster complete (mbar_arrive_cluster), so what
// they wrote before arriving is visible after it.
template <bool kCluster>
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 1;
#ifdef NANOVLLM_WGMMA
  if constexpr (kCluster)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  else
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
#endif
  return done != 0;
}

// mbar_wait that traps (the launch fails: cudaErrorLaunchFailure) after ~2^24 polls, seconds of
// waiting: for new cross-CTA protocols, so that a barrier nobody completes fails a test instead of
// hanging it. kCluster: as mbar_try_wait.
template <bool kCluster = false>
__device__ __forceinline__ void mbar_wait_or_trap(uint64_t* bar, uint32_t parity) {
  for (uint32_t polls = 0;; ++polls) {
    if (mbar_try_wait<kCluster>(bar, parity)) return;
    if (polls == (1u << 24)) __trap();
  }
}

// Box at (x = column, y = row) of the 2D tensor `map` into shared memory at dst (1024-byte aligned
// for the 128-byte swizzle); its bytes complete a transaction on `bar`. Coordinates outside the
// tensor read as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
#ifdef NANOVLLM_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
#endif
}

// The box at (x = column, y = row) of `map` from shared memory at src (laid out as tma_load_2d
// would have written it); parts outside the tensor are not written. One bulk-group operation of
// the calling thread: tma_store_commit closes a group, tma_store_wait_read<N> waits until at most N
// groups still read their shared memory (src may then be rewritten), tma_store_wait<N> until at
// most N are incomplete. src's generic-proxy writes need fence_proxy_async_smem first.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int x, int y) {
#ifdef NANOVLLM_WGMMA
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(x), "r"(y)
               : "memory");
#endif
}
__device__ __forceinline__ void tma_store_commit() {
#ifdef NANOVLLM_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
#ifdef NANOVLLM_WGMMA
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void tma_store_wait() {
#ifdef NANOVLLM_WGMMA
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// The same box into shared memory at dst of every CTA in `mask` (bit i: CTA rank i of the cluster),
// each copy completing a transaction on the mbarrier at bar's offset in its own CTA (TMA multicast:
// one read of global memory, or of L2, for the whole cluster).
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                                      uint16_t mask) {
#ifdef NANOVLLM_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(mask)
      : "memory");
#endif
}

// One arrival on the mbarrier at bar's offset in the shared memory of cluster CTA `cta` (this CTA
// included), released to the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
#ifdef NANOVLLM_WGMMA
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#endif
}

// One arrival on the mbarrier at bar's offset in cluster CTA `cta` where `pred` holds, without a
// branch (as mbar_arrive_if: between warpgroup MMAs in flight), and with the default release at CTA
// scope: it orders nothing for the peer but the arrival itself (a stage's "empty": the products that
// read the stage are complete when it is made). A cluster-scope release (mbar_arrive_cluster) waits
// for the thread's memory operations in flight, the products of the next stage among them.
__device__ __forceinline__ void mbar_arrive_cluster_if(uint64_t* bar, uint32_t cta, bool pred) {
#ifdef NANOVLLM_WGMMA
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(bar)), "r"(cta));
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p mbarrier.arrive.shared::cluster.b64 _, [%0];\n}\n" ::"r"(remote),
      "r"(uint32_t(pred))
      : "memory");
#endif
}

// v into the float at p's offset in the shared memory of cluster CTA `cta` (this CTA included); a
// later mbar_arrive_cluster by the same thread releases it to that CTA's waiters.
__device__ __forceinline__ void st_cluster_f32(const float* p, uint32_t cta, float v) {
#ifdef NANOVLLM_WGMMA
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(p)), "r"(cta));
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(v) : "memory");
#endif
}

// The cluster barrier, split: every thread of every CTA arrives (release), then waits (acquire) for
// all of them. Between the two a thread may go on with work that no other CTA waits for.
__device__ __forceinline__ void cluster_arrive() {
#ifdef NANOVLLM_WGMMA
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#ifdef NANOVLLM_WGMMA
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// Register budget of the calling warpgroup (all its threads execute it): producers give registers
// back, consumers take them (FlashAttention-3's setmaxnreg split).
template <int N>
__device__ __forceinline__ void regs_dec() {
#ifdef NANOVLLM_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void regs_inc() {
#ifdef NANOVLLM_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads: sync waits, arrive does not.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace nanovllm::cuda
