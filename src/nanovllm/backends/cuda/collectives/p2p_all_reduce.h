// One-shot all-reduce over NVLink peer memory, for the small messages of decode (a Qwen3-8B batch-1
// step makes 73 all-reduces of 16 KB). NCCL's ring is latency-bound at that size (bench/RESULTS.md:
// "NCCL all-reduce of BF16 [T, H], eager"); here one kernel does it: each rank copies its input
// into its own buffer, which every peer maps, raises a flag in each peer's memory, waits for the
// peers' flags, and sums all ranks' buffers straight over NVLink, in rank order (so every rank gets
// bit-identical sums).
//
// Buffers and flags: one allocation per rank, mapped by the others through CUDA IPC handles
// (ranks in one process, e.g. the tests' threads, use the pointer and peer access instead),
// exchanged once by an all-gather. The data buffer is double-buffered by call parity: a rank
// overwrites the half of call e only at call e + 2, after it has seen every peer's flag of call
// e + 1, i.e. after every peer has finished call e. The kernel keeps its call counter on the
// device, so it is CUDA-graph safe, and claims its number before its successor may launch, so
// calls may follow each other directly (see claim_call). The fused all-reduce + residual add +
// RMSNorm (p2p_all_reduce_norm.cu) has two exchanges: up to kMaxBytes it shares the grid and call
// counters (so the two kinds of call may alternate) but pushes its data into the peers' memory
// instead, in NCCL's LL format (data and call number in each 8-byte word: one NVLink crossing per
// call); larger messages (decode batches up to 512 at H = 4096) go to a bulk kernel of up to 128
// blocks with counters and buffers of its own, which pushes plain floats, then one flag per block
// and peer. A wait that outlasts 30 s traps (a dead peer: the TP watchdog normally ends the
// process first).
//
// Safety on shared hosts: plain peer memory and IPC, no NVLink multicast.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/utils/dtype.h"

namespace nanovllm {

class P2pAllReduce {
 public:
  static constexpr int kMaxRanks = 8;
  // The largest message (and the size of each data half); larger ones go to NCCL. Up to 64 KB this
  // kernel beats NCCL's ring; at 512 KB its 8 CTAs pulling over NVLink are latency-bound and NCCL,
  // keeping more bytes in flight, wins (bench/RESULTS.md:
  // "so the P2P path is now capped at 64 KiB").
  static constexpr size_t kMaxBytes = size_t(64) << 10;
  // bytes of every rank -> the concatenation in rank order (a collective, e.g. ncclAllGather).
  using AllGather = std::function<std::vector<uint8_t>(const std::vector<uint8_t>&)>;

  // Collective: every rank constructs it at the same point. usable() is false on every rank when
  // any rank cannot map its peers (no P2P path), so all ranks fall back to NCCL together.
  P2pAllReduce(int rank, int world, int device, cuda::Stream stream, const AllGather& all_gather, bool enabled);
  ~P2pAllReduce();
  P2pAllReduce(const P2pAllReduce&) = delete;
  P2pAllReduce& operator=(const P2pAllReduce&) = delete;

  bool usable() const { return usable_; }
  // x (n elements of dt, on the stream's device) summed over ranks in place. False (nothing
  // launched) when the message does not fit: F32/BF16 only, at most kMaxBytes, a 16-byte
  // multiple at a 16-byte aligned address (the same answer on every rank: same shapes).
  bool run(void* x, int64_t n, DType dt);
  // The all-reduce of F32 partial sums [T, H] fused with the residual add + RMSNorm that follow
  // it (Communicator::all_reduce_add_rms_norm): residual [T, H] updated in place, out [T, H] =
  // norm(residual) * w [H], all BF16; bit-identical to run() + cast + add_rms_norm. False
  // (nothing launched) when it does not fit: ceil(T / 128) rows of H floats in 64 KiB (T <= 512
  // at H = 4096), H a multiple of 8 of at most 8192, 16-byte aligned pointers, 2, 4 or 8 ranks.
  bool run_add_rms_norm(const float* partial, int64_t T, int64_t H, cuda::bf16* residual, const cuda::bf16* w,
                        float eps, cuda::bf16* out);

 private:
  int rank_, world_;
  cuda::Stream stream_;
  bool usable_ = false;
  int bulk_max_grid_ = 0;      // the bulk kernel's blocks resident at once (p2p_all_reduce.cuh)
  char* mine_ = nullptr;       // this rank's allocation
  std::vector<char*> peers_;   // every rank's allocation as mapped here (mine_ at rank_)
  std::vector<char*> opened_;  // IPC mappings to close
};

}  // namespace nanovllm
