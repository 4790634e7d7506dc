// Backend::linear_residual_rms_linear on CUDA: a decoder layer's row-parallel product, the residual
// add and the RMSNorm whose weight models/norm_fold.h folded into the projection after it
// (KernelOptions::norm_fold), with no add + RMSNorm kernel between the two products:
//  1. residual += x @ wo^T: cuBLASLt with the residual as its C input (beta 1, in place), so the
//     sum is rounded to BF16 once (add_rms_norm rounds the product, then the sum);
//  2. r[t] = 1 / sqrt(mean(residual[t]^2) + eps) in F32 (rms_rows_kernel below, over the BF16 sum,
//     as add_rms_norm reads it);
//  3. the projection of the residual on our Hopper GEMM, each row of its accumulators multiplied by
//     r before the epilogue (gemm_wgmma.h: row_scale): the gated MLP's SiLU form, or the qkv form
//     with the q/k norm + RoPE + KV store (qk_norm_rope.cu: linear_rope_wgmma).
// Why: add_rms_norm reads the product and the residual and writes the residual and the normed
// stream, 4 x T x H BF16 values (38 us a call at 16,384 x 1,024 on an H200, two a layer: ~7% of an
// embedding step; bench/RESULTS.md, "Pooling models"); here the product's epilogue reads the
// residual once and step 2 reads it once more. Where step 3 would not run our GEMM (plan_linear /
// linear_rope_fused say otherwise: small T, gemm=cublaslt) nothing runs and the caller takes the
// usual path with the norm's unit weight.
//
// rms_rows_kernel: x [T][H] BF16 (H % 8 == 0, rows 16-byte aligned) -> r [T] F32. One warp a row,
// 8 rows a CTA of 256 threads: lane l adds the squares of the 16-byte chunks l, l + 32, ... of its
// row in F32, then a butterfly over the warp; lane 0 writes r. A row is 2 KiB at H = 1,024: the
// kernel is a read of the residual at DRAM/L2 speed.
#include <initializer_list>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"

namespace nanovllm {
namespace {

constexpr int kRowsPerCta = 8;

__global__ void rms_rows_kernel(const cuda::bf16* __restrict__ x, float* __restrict__ r, int64_t T, int H, float eps) {
  cuda::pdl_begin();
  const int64_t row = int64_t(blockIdx.x) * kRowsPerCta + (threadIdx.x >> 5);
  const int lane = int(threadIdx.x & 31);
  if (row >= T) return;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * H);
  float ss = 0.f;
  for (int i = lane; i < H / 8; i += 32) {
    float a[8];
    cuda::unpack8(xr[i], a);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += a[k] * a[k];
  }
  ss = cuda::warp_sum(ss);
  if (lane == 0) r[row] = 1.0f / sqrtf(ss / float(H) + eps);
}

}  // namespace

bool CudaBackend::folds_rms_norms() const { return options_.norm_fold && wgmma_ && options_.gemm != Gemm::CublasLt; }

bool CudaBackend::linear_residual_rms_linear(const Tensor& x, const Tensor& wo, Tensor& residual, float eps,
                                             const Tensor& w, Tensor& out, bool silu_mul, const QkNormRopeStore* rope) {
  if (!folds_rms_norms()) return false;
  check_linear(x, wo, residual);
  if (silu_mul && !rope)
    check_linear_silu_mul(residual, w, out);
  else
    check_linear(residual, w, out);
  const int64_t T = x.size(0), Ko = x.size(1), K = residual.size(1), N = out.size(1);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &wo, &residual, &w, &out})
    if (t->dtype() != DType::BF16) return false;
  if (T == 0 || K % 8 != 0 || !cuda::aligned16({x.raw(), wo.raw(), residual.raw(), w.raw(), out.raw()})) return false;
  // Step 3's kernel first: without it there is nothing to gain.
  if (rope) {
    if (!linear_rope_fused(residual, w, out, *rope, {})) return false;
  } else {
    cuda::LinearProblem prob;
    prob.T = T, prob.N = N, prob.K = K, prob.silu_mul = silu_mul, prob.aligned16 = true;
    if (plan_linear(prob).kernel != cuda::LinearKernel::Wgmma) return false;
  }
  const GemmPlan* p = gemm_plan({T, K, Ko, false, GemmOperands::BF16});
  if (!p) return false;
  run_gemm(*p, wo.raw(), x.raw(), residual.raw(), nullptr, nullptr, /*accumulate=*/true);
  Tensor r = empty({T}, DType::F32);
  cuda::launch(rms_rows_kernel, dim3(cuda::ceil_div(T, kRowsPerCta)), dim3(32 * kRowsPerCta), 0, on_stream(),
               residual.data<cuda::bf16>(), r.data<float>(), T, int(K), eps);
  if (rope) {
    linear_rope_wgmma(residual, w, out, *rope, r.data<float>());
  } else {
    const bool pair = gemm_pairs();
    cuda::gemm_wgmma(residual.raw(), w.raw(), out.raw(), T, N, K,
                     cuda::gemm_wgmma_form(silu_mul, pair, options_.gemm_pingpong == GemmPingPong::On),
                     gemm_resident(pair), stream_, r.data<float>());
  }
  return true;
}

}  // namespace nanovllm
