// Device side of the P2P all-reduce (p2p_all_reduce.h), shared by its two files: the layout of
// each rank's allocation, the peer pointers, the memory-order helpers, call numbers and flags.
// p2p_all_reduce.cu holds the plain all-reduce and the class; p2p_all_reduce_norm.cu the two
// all-reduce + add + RMSNorm kernels (LL lines for decode's few rows, bulk pushes for more).
#pragma once
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/collectives/p2p_all_reduce.h"

namespace nanovllm::p2p {

using cuda::bf16;

constexpr int kBlocks = 8;     // the plain and LL kernels' fixed grid: every block takes part in every call
constexpr int kThreads = 128;  // the plain kernel's block
constexpr int kMaxRanks = P2pAllReduce::kMaxRanks;
// Layout of each rank's allocation: two data halves, then flags[kBlocks][kMaxRanks] (written by
// the peers: the call number of block b of rank r), then epochs[kBlocks] (this rank's call count).
constexpr size_t kFlagsOff = 2 * P2pAllReduce::kMaxBytes;
constexpr size_t kEpochsOff = kFlagsOff + sizeof(uint32_t) * kBlocks * kMaxRanks;
// Then the LL kernel's buffers: [2 halves][kMaxRanks sources][lines of 16 bytes], a line
// {x0, e, x1, e} carrying two floats of the source rank and the call number twice.
constexpr size_t kLLSlot = 2 * P2pAllReduce::kMaxBytes;  // lines for kMaxBytes of floats
constexpr size_t kLLHalf = kLLSlot * kMaxRanks;
constexpr size_t kLLOff = (kEpochsOff + sizeof(uint32_t) * kBlocks + 255) / 256 * 256;
// Then the bulk kernel's own counters (its grid and slabs differ from the kernels above, so it
// cannot share theirs): flags[kBulkBlocks][kMaxRanks], epochs[kBulkBlocks]; then its data:
// [2 halves][world sources][kBulkBlocks][kBulkSlab bytes], the F32 rows that source pushed for
// block b (rows b, b + kBulkBlocks, ... of the call; a block's slab never moves, see the kernel).
constexpr int kBulkBlocks = 128;
constexpr size_t kBulkSlab = size_t(64) << 10;  // 4 rows of 4096 floats: T <= 512 at H = 4096
constexpr size_t kBulkFlagsOff = kLLOff + 2 * kLLHalf;
constexpr size_t kBulkEpochsOff = kBulkFlagsOff + sizeof(uint32_t) * kBulkBlocks * kMaxRanks;
constexpr size_t kBulkDataOff = (kBulkEpochsOff + sizeof(uint32_t) * kBulkBlocks + 255) / 256 * 256;
constexpr size_t alloc_bytes(int world) { return kBulkDataOff + 2 * size_t(world) * kBulkBlocks * kBulkSlab; }

struct Peers {
  char* base[kMaxRanks];
};

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// A peer's data, never from a stale L1 line (the same half is rewritten two calls later).
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void store_volatile(uint4* p, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// This block's data of call e is where its peers read it (their memory or its own): tell every
// peer (thread r raises this rank's flag at rank r) and wait until every peer has said the same.
// flags_off: the kernel's flag array [blocks][kMaxRanks]. Called by all threads of the block.
__device__ __forceinline__ void exchange_flags(const Peers& P, int rank, int world, uint32_t e, size_t flags_off) {
  const int b = blockIdx.x, tid = threadIdx.x;
  __syncthreads();  // the block's part is written
  if (tid < world) {
    __threadfence_system();
    store_release_sys(reinterpret_cast<uint32_t*>(P.base[tid] + flags_off) + b * kMaxRanks + rank, e);
    const uint32_t* flag = reinterpret_cast<const uint32_t*>(P.base[rank] + flags_off) + b * kMaxRanks + tid;
    const uint64_t t0 = global_ns();
    while (int32_t(load_acquire_sys(flag) - e) < 0)
      if (global_ns() - t0 > 30ull * 1000 * 1000 * 1000) __trap();  // a peer is gone
  }
  __syncthreads();
}

// Claims this block's call number in the kernel's epoch array (epochs_off): epochs[b] + 1, except
// that the wrap goes from 0xffffffff to 2 (odd to even, as every step; the LL lines' zero initial
// flags never match), stored back at once and fenced, and shared with the block. Every all-reduce
// kernel claims before it lets its successor launch (pdl_begin), and claims before its own wait:
// so the next all-reduce, even one launched right behind this one with no kernel between (which
// starts while this one still runs), reads the count this one stored. (A count stored at the end,
// as before, raced there: both calls took the same number and the ranks fell out of step.)
// Volatile: the line may be in this SM's L1 from an earlier read.
__device__ __forceinline__ uint32_t claim_call(const Peers& P, int rank, size_t epochs_off, uint32_t* s_epoch) {
  if (threadIdx.x == 0) {
    volatile uint32_t* epochs = reinterpret_cast<volatile uint32_t*>(P.base[rank] + epochs_off);
    const uint32_t last = epochs[blockIdx.x];
    *s_epoch = last == 0xffffffffu ? 2u : last + 1;
    epochs[blockIdx.x] = *s_epoch;
    __threadfence();
  }
  __syncthreads();
  return *s_epoch;
}

// The fused kernels (p2p_all_reduce_norm.cu). The bulk kernel's blocks wait for their peers'
// blocks, so its grid must be resident at once (on every rank): bulk_resident_blocks is the most
// blocks of it that fit on `device` for `world` ranks, and the launcher declines a larger grid.
int bulk_resident_blocks(int world, int device);
// See P2pAllReduce::run_add_rms_norm; false (nothing launched) when the message does not fit.
bool launch_all_reduce_add_rms_norm(const Peers& P, int world, int rank, cuda::Stream st, int bulk_max_grid,
                                    const float* partial, int T, int H, bf16* residual, const bf16* w, float eps,
                                    bf16* out);

}  // namespace nanovllm::p2p
