// Entry points of the CUDA backend (and NCCL) for builds without CUDA (or without NCCL): they report that at run time,
// so headers need no #ifdefs (CTranslate2's pattern).
#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/communicator.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

#ifndef NANOVLLM_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend(int, const KernelOptions&) {
  throw UserError("--device cuda: this build has no CUDA backend (rebuild with nvcc and -DNANOVLLM_CUDA=ON)");
}
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
#endif

#ifndef NANOVLLM_WITH_NCCL

std::vector<uint8_t> make_nccl_unique_id() {
  throw UserError("tensor parallelism on CUDA: NCCL is not compiled in (rebuild with nccl.h and libnccl found)");
}
std::unique_ptr<Communicator> make_nccl_communicator(Backend&, int, int, const std::vector<uint8_t>&) {
  throw UserError("tensor parallelism on CUDA: NCCL is not compiled in (rebuild with nccl.h and libnccl found)");
}
#endif

}  // namespace nanovllm
