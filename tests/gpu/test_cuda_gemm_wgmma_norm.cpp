// The Hopper GEMM with the residual add + RMSNorm in its epilogue (backends/cuda/gemm_wgmma_norm.cu)
// against the two kernels it replaces: the same GEMM's plain form, then add_rms_norm. The residual
// must be equal bit for bit (the same products, the same roundings); the normed output within a
// BF16 rounding, and nearly always equal (only the order of the sum of squares differs).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/layers/layernorm.h"

namespace nanovllm::test {
namespace {

struct Case {
  int64_t T, H, K;
};

// Counts outputs that differ from want, and those beyond one BF16 rounding of it (+ slack).
struct Diff {
  size_t differ = 0, bad = 0;
};
Diff compare(const std::vector<float>& got, const std::vector<float>& want, float slack = 1e-6f) {
  Diff d;
  for (size_t e = 0; e < got.size(); ++e) {
    d.differ += got[e] != want[e];
    if (!(std::abs(got[e] - want[e]) <= std::abs(want[e]) / 128 + slack)) ++d.bad;
  }
  return d;
}

TEST(CudaGemmWgmmaNorm, EqualsTheGemmThenAddRmsNorm) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  // H: clusters of 1, 2, 3, 4 and 8 CTAs; T: one row, tails past 128, many row tiles a cluster; K:
  // one partial stage, tails, Qwen3-0.6B's o_proj and down_proj.
  for (const Case c : {Case{1, 256, 64}, Case{37, 1024, 1000}, Case{129, 512, 136}, Case{200, 768, 520},
                       Case{300, 2048, 2048}, Case{1000, 1024, 3072}, Case{4099, 1024, 2048}}) {
    const int64_t T = c.T, H = c.H, K = c.K;
    const auto xv = rand_bf16(size_t(T * K), 31), wv = rand_bf16(size_t(H * K), 32, -0.1f, 0.1f);
    const auto rv = rand_bf16(size_t(T * H), 33, -4.f, 4.f), nv = rand_bf16(size_t(H), 34, 0.5f, 1.5f);
    Tensor x = be.empty({T, K}, DType::BF16), w = be.empty({H, K}, DType::BF16), norm_w = be.empty({H}, DType::BF16);
    be.upload(xv.data(), DType::F32, x);
    be.upload(wv.data(), DType::F32, w);
    be.upload(nv.data(), DType::F32, norm_w);
    // The two kernels: the plain TMA-store form (the same products), then add_rms_norm.
    Tensor h = be.empty({T, H}, DType::BF16), res = be.empty({T, H}, DType::BF16);
    be.upload(rv.data(), DType::F32, res);
    cuda::gemm_wgmma(x.raw(), w.raw(), h.raw(), T, H, K, cuda::GemmWgmmaForm::Cols256Stages4PersistentTmaStore,
                     be.num_sms(), be.stream());
    be.add_rms_norm(h, res, norm_w, 1e-6f);
    const std::vector<float> want_out = be.to_host_f32(h), want_res = be.to_host_f32(res);
    // The fused kernel on as many clusters as fit, then on one (which walks every row tile, its
    // exchange buffers reused tile after tile).
    const int fit = cuda::gemm_wgmma_add_rms_norm_max_clusters(H);
    ASSERT_GE(fit, 1) << "H " << H;
    for (const int clusters : {fit, 1}) {
      Tensor r2 = be.empty({T, H}, DType::BF16), out = be.empty({T, H}, DType::BF16);
      be.upload(rv.data(), DType::F32, r2);
      std::vector<uint16_t> sentinel(size_t(T * H), 0x7FC0);  // NaN: every output must be written
      be.upload(sentinel.data(), DType::BF16, out);
      cuda::gemm_wgmma_add_rms_norm(x.raw(), w.raw(), r2.raw(), norm_w.raw(), 1e-6f, out.raw(), T, H, K, clusters,
                                    be.stream());
      const Diff dr = compare(be.to_host_f32(r2), want_res), dout = compare(be.to_host_f32(out), want_out);
      const std::string name = "T " + std::to_string(T) + " H " + std::to_string(H) + " K " + std::to_string(K) +
                               " clusters " + std::to_string(clusters);
      std::printf(
          "[gpu] gemm_wgmma_add_rms_norm %s: residual %zu differ; out %zu of %zu differ, %zu by more than a "
          "BF16 rounding\n",
          name.c_str(), dr.differ, dout.differ, size_t(T * H), dout.bad);
      EXPECT_EQ(dr.differ, 0u) << name;
      EXPECT_EQ(dout.bad, 0u) << name;
      EXPECT_LE(dout.differ, size_t(T * H) / 100) << name;  // 1 / rms differs in its last bits at most
    }
  }
}

// The decoder layer's path (layernorm.h: RMSNorm's Deferred forms, Backend::linear_add_rms_norm):
// o_proj's product with the post-attention norm folded in, then gate_up + SiLU, against the same
// layer with gemm_norm off (the product, then add_rms_norm_linear), under gemm=wgmma at a row count
// the fold takes and one it does not.
TEST(CudaGemmWgmmaNorm, TheLayerNormFoldsItUnderTheOption) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  const int64_t H = 1024, K = 2048, I = 768;
  RowParallelLinear o_proj;
  Linear gate_up;
  RMSNorm norm;
  o_proj.create(be, H, K);
  gate_up.create(be, 2 * I, H);
  norm.create(be, H, 1e-6);
  const auto ov = rand_bf16(size_t(H * K), 41, -0.05f, 0.05f), gv = rand_bf16(size_t(2 * I * H), 42, -0.05f, 0.05f);
  const auto nv = rand_bf16(size_t(H), 43, 0.5f, 1.5f);
  be.upload(ov.data(), DType::F32, o_proj.weight);
  be.upload(gv.data(), DType::F32, gate_up.weight);
  be.upload(nv.data(), DType::F32, norm.weight);
  be.set_gemm(Gemm::Wgmma);
  for (const int64_t T : {int64_t(cuda::kGemmWgmmaMinRows) - 1, int64_t(1500)}) {
    const auto av = rand_bf16(size_t(T * K), uint32_t(T)), rv = rand_bf16(size_t(T * H), uint32_t(T + 1), -4.f, 4.f);
    auto run = [&](bool fold) {
      be.set_gemm_norm(fold);
      Tensor a = be.empty({T, K}, DType::BF16), res = be.empty({T, H}, DType::BF16);
      be.upload(av.data(), DType::F32, a);
      be.upload(rv.data(), DType::F32, res);
      const Tensor out = norm.forward_residual_linear(be, Deferred{&o_proj, a}, res, gate_up, true);
      std::vector<float> o = be.to_host_f32(out);
      const std::vector<float> r = be.to_host_f32(res);
      o.insert(o.end(), r.begin(), r.end());
      return o;
    };
    const std::vector<float> got = run(true), want = run(false);
    ASSERT_EQ(got.size(), want.size());
    // A normed value a rounding apart moves the products after it by far less than their rms.
    double ss = 0;
    for (float v : want) ss += double(v) * v;
    const Diff d = compare(got, want, float(std::sqrt(ss / double(want.size()))) / 256);
    std::printf(
        "[gpu] o_proj + norm + gate_up, T %lld: %zu of %zu differ with the fold, %zu by more than a BF16 "
        "rounding\n",
        (long long)T, d.differ, got.size(), d.bad);
    EXPECT_EQ(d.bad, 0u) << T;
    if (T < cuda::kGemmWgmmaMinRows) EXPECT_EQ(d.differ, 0u) << T;  // not folded: the same kernels
  }
  be.set_gemm(Gemm::Auto);
  be.set_gemm_norm(true);
}

}  // namespace
}  // namespace nanovllm::test
