// --quantization int8 on the CPU backend (cpu_int8_kernels.h): weights quantized at load to I8
// codes with one F32 scale per 32-element block of each row (WeightScales block_n 1, block_k 32);
// at run time each linear quantizes its activations the same way (per row and block), then the
// integer GEMM runs on every thread's share of the output rows.
#include <omp.h>

#include <string>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_int8_kernels.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void CpuBackend::quantize_weight_int8(const Tensor& w, Tensor& codes, WeightScales& scales) {
  if (w.dim() != 2) throw Error("cpu quantize_weight: w must be [N, K] (got " + shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1), nb = cpu::q8_blocks(K);
  codes = Tensor::host({N, K}, DType::I8);
  scales = WeightScales{Tensor::host({N, nb}, DType::F32), 1, cpu::kQ8Block};
  cpu::for_each_row_f32(w, [&](int64_t n, const float* row) {
    cpu::quantize_q8_row(row, K, codes.data<int8_t>() + n * K, scales.scale.data<float>() + n * nb);
  });
}

void CpuBackend::linear_int8(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0), nb = cpu::q8_blocks(K);
  const Tensor& s = scales.scale;
  if (!scales.defined() || s.dtype() != DType::F32 || s.dim() != 2 || s.size(0) != N || s.size(1) != nb ||
      scales.block_n != 1 || scales.block_k != cpu::kQ8Block)
    throw Error("cpu linear: I8 weights " + shape_str(w.shape()) + " need F32 scales [" + std::to_string(N) + ", " +
                std::to_string(nb) + "] per 1 x 32 block (got " +
                (scales.defined() ? shape_str(s.shape()) + " " + dtype_name(s.dtype()) : std::string("none")) +
                ", blocks " + std::to_string(scales.block_n) + " x " + std::to_string(scales.block_k) + ")");
  if (x.dtype() != DType::F32 || out.dtype() != DType::F32) throw Error("cpu linear: x and out must be F32");
  if (T == 0) return;
  std::vector<int8_t> xq(size_t(T * K));
  std::vector<float> xs(size_t(T * nb));
#pragma omp parallel for if (T * K >= (1 << 16))
  for (int64_t t = 0; t < T; ++t)
    cpu::quantize_q8_row(x.data<float>() + t * K, K, xq.data() + t * K, xs.data() + t * nb);
  const int8_t* wp = w.data<int8_t>();
  const float* wsp = s.data<float>();
  float* op = out.data<float>();
  cpu::split_rows(N, T * N * K,
                  [&](int64_t n0, int64_t n1) { cpu::gemm_q8(xq.data(), xs.data(), T, wp, wsp, K, n0, n1, op, N); });
}

}  // namespace nanovllm
