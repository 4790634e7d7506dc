// NCCL collectives for tensor parallelism, on the CUDA backend's stream (so they are ordered with
// the model's kernels and captured into CUDA graphs like them). One communicator per rank; rank 0
// makes the ncclUniqueId and the TCP control channel (dist/tp_group) hands it to the others.
//
// Safety on shared hosts: NVLink SHARP / multicast (NVLS) stays off. NCCL reads NCCL_NVLS_ENABLE
// when a communicator is created, so it is forced to 0 here, whatever the caller's environment
// says; nothing in this project calls cuMulticastCreate.
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/collectives/p2p_all_reduce.h"
#include "nanovllm/backends/communicator.h"

namespace nanovllm {

namespace {

[[noreturn]] void throw_nccl(ncclResult_t r, const char* what, ncclComm_t comm) {
  std::string msg = std::string("NCCL error: ") + ncclGetErrorString(r) + " in " + what;
  if (comm) {
    const char* last = ncclGetLastError(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
  throw Error(msg);
}

#define NV_NCCL_CHECK(x, comm)                             \
  do {                                                     \
    ncclResult_t nv_r_ = (x);                              \
    if (nv_r_ != ncclSuccess) throw_nccl(nv_r_, #x, comm); \
  } while (0)

ncclDataType_t nccl_dtype(DType t, const char* op) {
  switch (t) {
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::F32: return ncclFloat32;
    case DType::I32: return ncclInt32;
    default: throw Error(std::string(op) + ": dtype " + dtype_name(t) + " has no NCCL type");
  }
}

class NcclCommunicator final : public Communicator {
 public:
  // The backend's KernelOptions (the same on every rank: rank 0's) choose the paths:
  // p2p_all_reduce: small all-reduces by the one-shot NVLink kernel (p2p_all_reduce.h) where every
  // rank can map its peers; all_reduce_norm: the fused all-reduce + add + RMSNorm (needs P2P).
  NcclCommunicator(CudaBackend& be, int rank, int world, const ncclUniqueId& id)
      : rank_(rank), world_(world), stream_(static_cast<cudaStream_t>(be.stream())),
        fuse_norm_(be.kernel_options().all_reduce_norm) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    NV_CUDA_CHECK(cudaSetDevice(be.device_index()));
    NV_NCCL_CHECK(ncclCommInitRank(&comm_, world, id, rank), nullptr);
    p2p_ = std::make_unique<P2pAllReduce>(
        rank, world, be.device_index(), cuda::Stream{stream_, be.pdl()},
        [this](const std::vector<uint8_t>& b) { return gather_bytes(b); }, be.kernel_options().p2p_all_reduce);
  }
  // Shutdown: the stream is drained first; ncclCommAbort (not Destroy) frees the communicator
  // without a barrier with the other ranks, so a rank that is gone or still busy cannot hold the
  // exit up (the engine's CUDA graphs, which captured our collectives, are destroyed before this).
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    p2p_.reset();
    if (comm_) ncclCommAbort(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce_sum(Tensor& x) override {
    if (x.device() != Device::CUDA) throw Error("all_reduce_sum: the tensor must be on the GPU");
    if (x.numel() == 0) return;
    // Decode-sized messages: one kernel over NVLink (the same choice on every rank: same shapes).
    if (p2p_ && p2p_->run(x.raw(), x.numel(), x.dtype())) return;
    NV_NCCL_CHECK(ncclAllReduce(x.raw(), x.raw(), size_t(x.numel()), nccl_dtype(x.dtype(), "all_reduce_sum"), ncclSum,
                                comm_, stream_),
                  comm_);
  }

  // Decode sizes with the P2P path: one kernel (p2p_all_reduce.h) for the all-reduce, the cast and
  // the residual add + RMSNorm that were three.
  bool all_reduce_add_rms_norm(Tensor& partial, Tensor& residual, const Tensor& w, float eps, Tensor& out) override {
    const bool fits = fuse_norm_ && p2p_ && partial.dtype() == DType::F32 && residual.dtype() == DType::BF16 &&
                      w.dtype() == DType::BF16 && out.dtype() == DType::BF16 && partial.dim() == 2 &&
                      partial.shape() == residual.shape() && partial.shape() == out.shape() &&
                      w.numel() == partial.size(1);
    if (!fits) return false;
    return p2p_->run_add_rms_norm(partial.data<float>(), partial.size(0), partial.size(1), residual.data<cuda::bf16>(),
                                  w.data<cuda::bf16>(), eps, out.data<cuda::bf16>());
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    if (in.device() != Device::CUDA || out.device() != Device::CUDA)
      throw Error("all_gather: tensors must be on the GPU");
    if (in.dtype() != out.dtype() || out.numel() != in.numel() * world_)
      throw Error("all_gather: out must hold world_size x in (" + shape_str(in.shape()) + " -> " +
                  shape_str(out.shape()) + ")");
    if (in.numel() == 0) return;
    NV_NCCL_CHECK(
        ncclAllGather(in.raw(), out.raw(), size_t(in.numel()), nccl_dtype(in.dtype(), "all_gather"), comm_, stream_),
        comm_);
  }

 private:
  // Host bytes of every rank, concatenated in rank order (set-up only: synchronizes).
  std::vector<uint8_t> gather_bytes(const std::vector<uint8_t>& mine) {
    const size_t n = mine.size();
    uint8_t* d = nullptr;
    NV_CUDA_CHECK(cudaMalloc(&d, n * size_t(world_ + 1)));
    std::vector<uint8_t> all(n * size_t(world_));
    try {
      NV_CUDA_CHECK(cudaMemcpyAsync(d, mine.data(), n, cudaMemcpyHostToDevice, stream_));
      NV_NCCL_CHECK(ncclAllGather(d, d + n, n, ncclUint8, comm_, stream_), comm_);
      NV_CUDA_CHECK(cudaMemcpyAsync(all.data(), d + n, all.size(), cudaMemcpyDeviceToHost, stream_));
      NV_CUDA_CHECK(cudaStreamSynchronize(stream_));
    } catch (...) {
      cudaFree(d);
      throw;
    }
    cudaFree(d);
    return all;
  }

  int rank_, world_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  bool fuse_norm_;
  std::unique_ptr<P2pAllReduce> p2p_;
};

}  // namespace

std::vector<uint8_t> make_nccl_unique_id() {
  ncclUniqueId id;
  NV_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&id),
                              reinterpret_cast<const uint8_t*>(&id) + sizeof(id));
}

std::unique_ptr<Communicator> make_nccl_communicator(Backend& be, int rank, int world,
                                                     const std::vector<uint8_t>& unique_id) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  if (!cuda) throw UserError("tensor parallelism with NCCL needs the plain CUDA backend (not " + be.name() + ")");
  if (unique_id.size() != sizeof(ncclUniqueId))
    throw Error("NCCL unique id has " + std::to_string(unique_id.size()) + " bytes, expected " +
                std::to_string(sizeof(ncclUniqueId)));
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  return std::make_unique<NcclCommunicator>(*cuda, rank, world, id);
}

}  // namespace nanovllm
