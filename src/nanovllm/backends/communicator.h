// Collectives for tensor parallelism (nano-vllm's torch.distributed calls). One Communicator per
// rank; every rank calls the same collectives in the same order. Implementations: NCCL on CUDA
// (backends/cuda/collectives/nccl_communicator.cu), TCP sockets on the CPU (dist/cpu_communicator.h, the
// test vehicle of CPU-only CI). With one rank the model makes no communicator calls at all.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/utils/tensor.h"

namespace nanovllm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // x: any shape, the backend's act dtype, on the backend's device; summed over ranks in place.
  // CUDA: enqueued on the backend's stream (graph-capturable).
  virtual void all_reduce_sum(Tensor& x) = 0;
  // The all-reduce of a row-parallel layer fused with the residual add + RMSNorm that follow it:
  // partial: [T, H] F32, this rank's partial sums (spent); residual: [T, H] act dtype, in place:
  // residual += round(sum over ranks of partial); out: [T, H] act dtype = rms_norm(residual) * w.
  // The same result as all_reduce_sum, cast and Backend::add_rms_norm, in fewer kernels. Returns
  // false, having done nothing, where there is no fused path for these shapes (the same answer on
  // every rank); the caller then runs the separate steps.
  virtual bool all_reduce_add_rms_norm(Tensor& partial, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
    (void)partial, (void)residual, (void)w, (void)eps, (void)out;
    return false;
  }
  // in: [rows, cols] on every rank -> out: [world, rows, cols] on every rank (rank-major).
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
};

// NCCL (CUDA builds; the CPU-only build's stub throws UserError "NCCL is not compiled in"):
std::vector<uint8_t> make_nccl_unique_id();  // rank 0 makes it; 128 bytes
// be: a CudaBackend; its KernelOptions decide the collectives' paths (p2p_all_reduce: decode-sized
// all-reduces through the one-shot NVLink kernel of backends/cuda/collectives/p2p_all_reduce.h where all
// ranks can map each other, else every collective is NCCL's; all_reduce_norm: the fused
// all-reduce + residual add + RMSNorm). Every rank must pass the same options (the engine sends
// rank 0's to all ranks).
std::unique_ptr<Communicator> make_nccl_communicator(Backend& be, int rank, int world,
                                                     const std::vector<uint8_t>& unique_id);

}  // namespace nanovllm
