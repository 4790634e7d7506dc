// TMA descriptors (tma_desc.h): cuTensorMapEncodeTiled through the runtime's driver entry point.
#include "nanovllm/backends/cuda/tma_desc.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm::cuda {

TmaDesc make_tma_2d(const void* base, bool bf16, long long inner, long long rows, long long row_bytes,
                    unsigned box_inner, unsigned box_rows, bool swizzle128, const char* what) {
  static_assert(sizeof(TmaDesc) == sizeof(CUtensorMap), "TmaDesc holds a CUtensorMap");
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  // The driver's entry point, looked up once (immutable afterwards): the FP8 cache's scratch gets
  // new descriptors every layer, and a lookup per descriptor made short prefills much slower
  // (bench/RESULTS.md: "From attention_prefill_wgmma_tma.cu").
  static void* const fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    NV_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    return q == cudaDriverEntryPointSuccess ? f : nullptr;
  }();
  if (!fn) throw Error(std::string(what) + ": cuTensorMapEncodeTiled is unavailable");
  TmaDesc d{};
  const cuuint64_t dims[2] = {cuuint64_t(inner), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_bytes)};
  const cuuint32_t box[2] = {box_inner, box_rows};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = reinterpret_cast<Encode>(fn)(
      reinterpret_cast<CUtensorMap*>(d.bytes), bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT32,
      2, const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string(what) + ": cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ") for " +
                std::to_string(rows) + " rows x " + std::to_string(inner) + " elements, boxes of " +
                std::to_string(box_rows) + " x " + std::to_string(box_inner));
  return d;
}

}  // namespace nanovllm::cuda
