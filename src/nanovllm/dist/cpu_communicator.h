// Collectives for CPU tensor parallelism over TCP (the test vehicle for TP in CPU-only CI; the
// GPU path is NCCL). A star through rank 0: workers send their tensor to rank 0, which reduces
// in rank order 0, 1, ..., N-1 (so every run sums identically) or stacks the pieces, and sends
// the result back. Tensors are host memory of the CPU backend (F32 activations).
#pragma once
#include <vector>

#include "nanovllm/backends/communicator.h"
#include "nanovllm/dist/socket.h"

namespace nanovllm {

class CpuCommunicator final : public Communicator {
 public:
  // peers: rank 0: one socket per rank (index 0 unused); a worker: [0] = its socket to rank 0.
  // These sockets carry only collectives (not control messages), so their byte streams stay
  // in step. timeout_s bounds each wait on a live peer; a dead one is reported at once.
  CpuCommunicator(int rank, int world, std::vector<Socket> peers, double timeout_s = 300);
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce_sum(Tensor& x) override;
  void all_gather(const Tensor& in, Tensor& out) override;

 private:
  int rank_, world_;
  std::vector<Socket> peers_;
  double timeout_s_;
  std::vector<float> scratch_;
};

}  // namespace nanovllm
