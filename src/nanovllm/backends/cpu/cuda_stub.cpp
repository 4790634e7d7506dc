// Entry points of the CUDA backend for builds without CUDA: they report that at run time, so
// headers need no #ifdefs (CTranslate2's pattern).
#include "nanovllm/ops/backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

#ifndef NANOVLLM_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend(int) {
  throw UserError("--device cuda: this build has no CUDA backend (rebuild with nvcc and -DNANOVLLM_CUDA=ON)");
}
bool cuda_available() { return false; }
#endif

}  // namespace nanovllm
