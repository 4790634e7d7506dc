#include "nanovllm/dist/cpu_communicator.h"

#include <cstring>

#include "nanovllm/utils/error.h"

namespace nanovllm {

CpuCommunicator::CpuCommunicator(int rank, int world, std::vector<Socket> peers, double timeout_s)
    : rank_(rank), world_(world), peers_(std::move(peers)), timeout_s_(timeout_s) {
  const size_t want = rank == 0 ? size_t(world) : 1;
  if (peers_.size() != want)
    throw Error("CpuCommunicator: " + std::to_string(peers_.size()) + " sockets for rank " + std::to_string(rank));
}

void CpuCommunicator::all_reduce_sum(Tensor& x) {
  if (x.device() != Device::CPU || x.dtype() != DType::F32)
    throw Error("CpuCommunicator::all_reduce_sum: wants an F32 host tensor, got " + std::string(dtype_name(x.dtype())));
  const size_t n = size_t(x.numel());
  float* v = x.data<float>();
  if (rank_ != 0) {
    peers_[0].send_all(v, n * 4);
    peers_[0].recv_all(v, n * 4, timeout_s_);
    return;
  }
  scratch_.resize(n);
  for (int r = 1; r < world_; ++r) {  // rank order: the same sums on every run
    peers_[size_t(r)].recv_all(scratch_.data(), n * 4, timeout_s_);
    for (size_t i = 0; i < n; ++i) v[i] += scratch_[i];
  }
  for (int r = 1; r < world_; ++r) peers_[size_t(r)].send_all(v, n * 4);
}

void CpuCommunicator::all_gather(const Tensor& in, Tensor& out) {
  if (in.device() != Device::CPU || out.device() != Device::CPU || in.dtype() != out.dtype() || in.dim() != 2 ||
      out.dim() != 3 || out.size(0) != world_ || out.size(1) != in.size(0) || out.size(2) != in.size(1))
    throw Error("CpuCommunicator::all_gather: in " + shape_str(in.shape()) + " -> out " + shape_str(out.shape()) +
                " (want [" + std::to_string(world_) + ", rows, cols], same dtype, host memory)");
  const size_t bytes = in.nbytes();
  char* o = static_cast<char*>(out.raw());
  if (rank_ != 0) {
    peers_[0].send_all(in.raw(), bytes);
    peers_[0].recv_all(o, bytes * size_t(world_), timeout_s_);
    return;
  }
  std::memcpy(o, in.raw(), bytes);
  for (int r = 1; r < world_; ++r) peers_[size_t(r)].recv_all(o + size_t(r) * bytes, bytes, timeout_s_);
  for (int r = 1; r < world_; ++r) peers_[size_t(r)].send_all(o, bytes * size_t(world_));
}

}  // namespace nanovllm
