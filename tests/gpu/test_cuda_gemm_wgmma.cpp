// Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) in each tile form against a double-precision
// product of the same BF16 inputs, at shapes with tails in T, N and K; its fused gate_up + SiLU form
// against the GEMM then silu_and_mul.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/layers/rotary_embedding.h"

namespace nanovllm::test {
namespace {

struct Case {
  int64_t T, N, K;
};

TEST(CudaGemmWgmma, EveryFormMatchesADoubleProductWithTails) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  // T: one row, a partial tile, several tiles and a tail; N: below, at and past the 128 / 256
  // weight-row tiles; K: one partial stage, several stages with a tail, many stages.
  for (const Case c : {Case{1, 256, 64}, Case{37, 1000, 1000}, Case{129, 384, 136}, Case{300, 520, 4096},
                       Case{256, 2048, 1024}, Case{4200, 1024, 512}}) {
    const auto xv = rand_bf16(size_t(c.T * c.K), 7), wv = rand_bf16(size_t(c.N * c.K), 8);
    std::vector<double> ref(size_t(c.T * c.N));
    double ss = 0;
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t n = 0; n < c.N; ++n) {
        double a = 0;
        for (int64_t k = 0; k < c.K; ++k) a += double(xv[size_t(t * c.K + k)]) * wv[size_t(n * c.K + k)];
        ref[size_t(t * c.N + n)] = a;
        ss += a * a;
      }
    const double rms = std::sqrt(ss / double(ref.size()));
    Tensor x = be.empty({c.T, c.K}, DType::BF16), w = be.empty({c.N, c.K}, DType::BF16);
    be.upload(xv.data(), DType::F32, x);
    be.upload(wv.data(), DType::F32, w);
    for (const cuda::GemmWgmmaForm form : cuda::kGemmWgmmaForms) {
      Tensor out = be.empty({c.T, c.N}, DType::BF16);
      std::vector<uint16_t> sentinel(size_t(c.T * c.N), 0x7FC0);  // NaN: every output must be written
      be.upload(sentinel.data(), DType::BF16, out);
      cuda::gemm_wgmma(x.data<uint16_t>(), w.data<uint16_t>(), out.data<uint16_t>(), c.T, c.N, c.K, form,
                       be.gemm_resident(cuda::gemm_wgmma_form_pairs(form)), be.stream());
      std::vector<uint16_t> got(size_t(c.T * c.N));
      be.download(out, got.data());
      const std::string name = std::string(cuda::gemm_wgmma_form_name(form)) + " T " + std::to_string(c.T) + " N " +
                               std::to_string(c.N) + " K " + std::to_string(c.K);
      double worst = 0;
      size_t bad = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double g = bf16_to_f32(got[i]), e = std::abs(g - ref[i]);
        // One BF16 rounding of an FP32 sum: 2^-8 of the value, plus the sum's own float error.
        if (!(e <= std::abs(ref[i]) / 256 + rms / 4096)) ++bad;
        if (std::isfinite(g)) worst = std::max(worst, e / rms);
      }
      std::printf("[gpu] gemm_wgmma %s: worst error %.2e x rms, %zu outside\n", name.c_str(), worst, bad);
      EXPECT_EQ(bad, 0u) << name;
    }
  }
}

TEST(CudaGemmWgmma, GateUpSiluEqualsTheGemmThenSiluAndMul) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  // I: below, at and past a 128-output tile; T and K with tails.
  // (T 4,200 x I 1,024: more tiles than the CTAs or pairs that fit at once, a pair's last tile all rank
  // 0's, and more stages a tile than the ring holds.)
  for (const Case c : {Case{37, 200, 1000}, Case{129, 384, 136}, Case{256, 520, 1024}, Case{4200, 1024, 256}}) {
    const int64_t T = c.T, I = c.N, K = c.K;
    const auto xv = rand_bf16(size_t(T * K), 11), wv = rand_bf16(size_t(2 * I * K), 12);
    Tensor x = be.empty({T, K}, DType::BF16), w = be.empty({2 * I, K}, DType::BF16);
    be.upload(xv.data(), DType::F32, x);
    be.upload(wv.data(), DType::F32, w);
    // The unfused path on the same GEMM: gate_up [T, 2I], then silu_and_mul.
    Tensor gate_up = be.empty({T, 2 * I}, DType::BF16), unfused = be.empty({T, I}, DType::BF16),
           fused = be.empty({T, I}, DType::BF16);
    cuda::gemm_wgmma(x.raw(), w.raw(), gate_up.raw(), T, 2 * I, K,
                     cuda::GemmWgmmaForm::Cols256Stages4PersistentTmaStore, be.num_sms(), be.stream());
    be.silu_and_mul(gate_up, unfused);
    std::vector<uint16_t> want(size_t(T * I));
    be.download(unfused, want.data());
    // And both against a double product: silu(g) * u with g, u, silu(g) rounded to BF16 as the model does.
    std::vector<double> ref(size_t(T * I));
    double ss = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < K; ++k) {
          g += double(xv[size_t(t * K + k)]) * wv[size_t(i * K + k)];
          u += double(xv[size_t(t * K + k)]) * wv[size_t((I + i) * K + k)];
        }
        const float gb = bf16_round(float(g));
        const double v = double(bf16_round(gb / (1.0f + std::exp(-gb)))) * bf16_round(float(u));
        ref[size_t(t * I + i)] = v;
        ss += v * v;
      }
    const double rms = std::sqrt(ss / double(ref.size()));
    for (const cuda::GemmWgmmaForm form :
         {cuda::GemmWgmmaForm::GateUpSilu, cuda::GemmWgmmaForm::GateUpSiluEpiWarps,
          cuda::GemmWgmmaForm::GateUpSiluEpiWarpsPair, cuda::GemmWgmmaForm::GateUpSiluPingPong,
          cuda::GemmWgmmaForm::GateUpSiluPingPongPair}) {
      std::vector<uint16_t> sentinel(size_t(T * I), 0x7FC0);  // NaN: every output must be written
      be.upload(sentinel.data(), DType::BF16, fused);
      cuda::gemm_wgmma(x.raw(), w.raw(), fused.raw(), T, I, K, form,
                       be.gemm_resident(cuda::gemm_wgmma_form_pairs(form)), be.stream());
      std::vector<uint16_t> got(size_t(T * I));
      be.download(fused, got.data());
      size_t differ = 0, bad = 0;
      for (size_t e = 0; e < ref.size(); ++e) {
        differ += got[e] != want[e];
        const double err = std::abs(double(bf16_to_f32(got[e])) - ref[e]);
        if (!(err <= std::abs(ref[e]) / 64 + rms / 1024)) ++bad;
      }
      const std::string name = std::string(cuda::gemm_wgmma_form_name(form)) + " T " + std::to_string(T) + " I " +
                               std::to_string(I) + " K " + std::to_string(K);
      std::printf("[gpu] gemm_wgmma %s: %zu of %zu differ from the unfused path, %zu outside\n", name.c_str(), differ,
                  ref.size(), bad);
      EXPECT_EQ(differ, 0u) << name;
      EXPECT_EQ(bad, 0u) << name;
    }
  }
}

// The backend's ops under gemm=wgmma (kernel_plan.h: plan_linear) against the same ops on
// cuBLASLt: linear, linear_silu_mul (the fused form) and add_rms_norm_linear with SiLU, at row
// counts on both sides of kGemmWgmmaMinRows. Each output within one BF16 rounding of cuBLASLt's
// (the two sum in different orders; most outputs are equal bit for bit).
TEST(CudaGemmWgmma, BackendOpsRunItUnderTheGemmOption) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  const int64_t K = 1024, N = 1536, I = 768;
  const auto wv = rand_bf16(size_t(2 * I * K), 21), nv = rand_bf16(size_t(K), 22, 0.5f, 1.5f);
  Tensor w = be.empty({2 * I, K}, DType::BF16), norm_w = be.empty({K}, DType::BF16);
  be.upload(wv.data(), DType::F32, w);
  be.upload(nv.data(), DType::F32, norm_w);
  Tensor wl = w.rows(0, N);
  for (const int64_t T : {int64_t(cuda::kGemmWgmmaMinRows) - 1, int64_t(1000)}) {
    const auto xv = rand_bf16(size_t(T * K), uint32_t(T)), rv = rand_bf16(size_t(T * K), uint32_t(T + 1));
    // Runs op with gemm = g, returns its output (and, for the norm, the new residual) as floats.
    auto run = [&](Gemm g, int op) {
      be.set_gemm(g);
      Tensor x = be.empty({T, K}, DType::BF16), res = be.empty({T, K}, DType::BF16);
      be.upload(xv.data(), DType::F32, x);
      be.upload(rv.data(), DType::F32, res);
      Tensor out = be.empty({T, op == 0 ? N : I}, DType::BF16);
      if (op == 0) be.linear(x, wl, out);
      if (op == 1) be.linear_silu_mul(x, w, out);
      if (op == 2) be.add_rms_norm_linear(x, res, norm_w, 1e-6f, w, out, true);
      std::vector<float> o = be.to_host_f32(out);
      if (op == 2) {
        const std::vector<float> r = be.to_host_f32(res);
        o.insert(o.end(), r.begin(), r.end());
      }
      return o;
    };
    for (int op = 0; op < 3; ++op) {
      const std::vector<float> got = run(Gemm::Wgmma, op), want = run(Gemm::CublasLt, op);
      ASSERT_EQ(got.size(), want.size());
      size_t differ = 0, bad = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        differ += got[e] != want[e];
        if (!(std::abs(got[e] - want[e]) <= std::abs(want[e]) / 128 + 1e-6f)) ++bad;
      }
      const std::string name = std::string(op == 0   ? "linear"
                                           : op == 1 ? "linear_silu_mul"
                                                     : "add_rms_norm_linear") +
                               " T " + std::to_string(T);
      std::printf("[gpu] gemm=wgmma %s: %zu of %zu differ from cuBLASLt's, %zu by more than a BF16 rounding\n",
                  name.c_str(), differ, got.size(), bad);
      EXPECT_EQ(bad, 0u) << name;
      // Below kGemmWgmmaMinRows both runs take cuBLASLt: the same bits.
      if (T < cuda::kGemmWgmmaMinRows) {
        EXPECT_EQ(differ, 0u) << name;
      }
    }
  }
  be.set_gemm(Gemm::Auto);
}

// add_rms_norm_linear_rope under gemm=wgmma (the qkv product with the q/k norm + RoPE + KV store in
// its epilogue: gemm_wgmma_rope) against the unfused path on the same GEMM (Backend's default:
// add_rms_norm_linear, then qk_norm_rope_store): qkv's q columns, both caches and the residual equal
// bit for bit (the fused form leaves qkv's k and v columns unwritten). Qwen3-0.6B's heads (16 q, 8 kv), and 6 q + 1 kv
// heads (a tile holding a k and a v head); without the q/k norm (Llama); rows with a tail past 128 and padded slots
// (-1). The step's cos/sin table, kept in the metadata by the first fused call, serves a second call on the same
// positions and is rebuilt for other positions. With and without gemm_pair (clusters of two CTAs) and
// gemm_pingpong (64-row tiles, the warpgroups taking turns).
TEST(CudaGemmWgmma, RopeEpilogueEqualsTheGemmThenQkNormRopeStore) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  be.set_gemm(Gemm::Wgmma);
  struct RopeCase {
    int64_t hq, hkv, T;
    bool norm;
    int64_t K;
  };
  const int64_t D = 128, bs = 16;
  for (int mode = 0; mode < 4; ++mode) {
    const bool pair = mode & 1, ping_pong = mode & 2;
    be.set_gemm_pair(pair);
    be.set_gemm_pingpong(ping_pong ? GemmPingPong::On : GemmPingPong::Off);
    // The epilogue of a CTA's tile runs under its next tile's K / 64 stages of products (the last
    // tile's after them): one tile a CTA, several (T 1,500 .. 4,200: more tiles than SMs), and 1, 3,
    // 16 and 32 stages.
    for (const RopeCase c :
         {RopeCase{16, 8, 600, true, 1024}, RopeCase{6, 1, 700, true, 1024}, RopeCase{16, 8, 530, false, 1024},
          RopeCase{16, 8, 2100, true, 1024}, RopeCase{16, 8, 1500, true, 2048}, RopeCase{8, 4, 4200, true, 64},
          RopeCase{8, 4, 3000, false, 192}}) {
      const int64_t K = c.K, W = (c.hq + 2 * c.hkv) * D, T = c.T, nblocks = (T + bs - 1) / bs + 2, slots = nblocks * bs;
      const auto xv = rand_bf16(size_t(T * K), 31), rv = rand_bf16(size_t(T * K), 32),
                 wv = rand_bf16(size_t(W * K), 33), nv = rand_bf16(size_t(K), 34, 0.5f, 1.5f),
                 qv = rand_bf16(size_t(D), 35, 0.5f, 1.5f), kv = rand_bf16(size_t(D), 36, 0.5f, 1.5f);
      auto upload = [&](const std::vector<float>& v, const Shape& s) {
        Tensor d = be.empty(s, DType::BF16);
        be.upload(v.data(), DType::F32, d);
        return d;
      };
      Tensor w = upload(wv, {W, K}), norm_w = upload(nv, {K}), qw, kw;
      if (c.norm) qw = upload(qv, {D}), kw = upload(kv, {D});
      std::vector<int32_t> pos(static_cast<size_t>(T)), slot(static_cast<size_t>(slots));
      for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = int32_t(3 * i + 5);
      std::iota(slot.begin(), slot.end(), 0);
      std::shuffle(slot.begin(), slot.end(), std::mt19937(37));
      slot.resize(size_t(T));
      slot[7] = slot[T - 1] = -1;
      Tensor positions = be.empty({T}, DType::I32), other_positions = be.empty({T}, DType::I32);
      be.upload(pos.data(), DType::I32, positions);
      for (auto& p : pos) p = 2 * p + 1;
      be.upload(pos.data(), DType::I32, other_positions);
      AttentionMetadata md = one_prefill_metadata(T, slot, nblocks);
      be.prepare_metadata(md);
      const RopeParams rope = RopeParams::plain(D, 1e6);
      // One run: qkv, k cache, v cache, residual as floats.
      auto run = [&](bool fused, const Tensor& positions) {
        Tensor x = upload(xv, {T, K}), res = upload(rv, {T, K});
        const std::vector<float> poison(size_t(slots * c.hkv * D), 1e30f);  // no k or v comes near it
        Tensor kc = be.empty({nblocks, bs, c.hkv, D}, DType::BF16), vc = be.empty({nblocks, bs, c.hkv, D}, DType::BF16);
        be.upload(poison.data(), DType::F32, kc);
        be.upload(poison.data(), DType::F32, vc);
        Tensor qkv = be.empty({T, W}, DType::BF16);
        const Backend::QkNormRopeStore r{qw, kw, positions, kc, vc, c.hq, c.hkv, D, 1e-6f, rope, md, {}};
        if (fused)
          be.add_rms_norm_linear_rope(x, res, norm_w, 1e-6f, w, qkv, r);
        else
          be.Backend::add_rms_norm_linear_rope(x, res, norm_w, 1e-6f, w, qkv, r);
        return std::vector<std::vector<float>>{be.to_host_f32(qkv), be.to_host_f32(kc), be.to_host_f32(vc),
                                               be.to_host_f32(res)};
      };
      const auto got = run(true, positions), want = run(false, positions);
      ASSERT_TRUE(md.d_rope_table.defined()) << "the fused call keeps the step's table";
      const auto again = run(true, positions);                                                      // the kept table
      const auto got_other = run(true, other_positions), want_other = run(false, other_positions);  // rebuilt
      auto compare = [&](const auto& got, const auto& want, const char* what) {
        // qkv: the q columns (the fused form leaves k and v to the caches).
        const char* names[] = {"qkv", "k cache", "v cache", "residual"};
        for (size_t k = 0; k < got.size(); ++k) {
          size_t differ = 0, compared = 0;
          for (size_t e = 0; e < got[k].size(); ++e)
            if (k != 0 || int64_t(e) % W < c.hq * D) differ += !(got[k][e] == want[k][e]), ++compared;
          const std::string name = std::string(names[k]) + " Hq " + std::to_string(c.hq) + " Hkv " +
                                   std::to_string(c.hkv) + " T " + std::to_string(T) + " K " + std::to_string(K) +
                                   (c.norm ? "" : " (no norm)") + (pair ? " (pairs)" : "") +
                                   (ping_pong ? " (ping-pong)" : "") + what;
          std::printf("[gpu] gemm_wgmma rope %s: %zu of %zu differ from the unfused path\n", name.c_str(), differ,
                      compared);
          EXPECT_EQ(differ, 0u) << name;
        }
      };
      compare(got, want, "");
      compare(again, want, " (the kept table)");
      compare(got_other, want_other, " (other positions)");
      size_t kept = 0;  // cache rows of slots nobody writes stay poisoned
      for (float v : got[1]) kept += v > 1e29f;
      EXPECT_EQ(kept, size_t((slots - (T - 2)) * c.hkv * D));
    }
  }
  be.set_gemm(Gemm::Auto);
  be.set_gemm_pair(KernelOptions{}.gemm_pair);
  be.set_gemm_pingpong(KernelOptions{}.gemm_pingpong);
}

TEST(CudaGemmWgmma, RefusesShapesOutsideItsLimits) {
  REQUIRE_GPU();
  CudaBackend be(0);
  Tensor t = be.empty({64, 64}, DType::BF16);
  auto* p = t.data<uint16_t>();
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 8, 8, 12, cuda::GemmWgmmaForm::Cols128Stages6, 132, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 0, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, 132, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p + 1, p, p, 8, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, 132, be.stream()), Error);
  // The TMA-store epilogues write rows of N BF16 by TMA: N a multiple of 8.
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 8, 12, 64, cuda::GemmWgmmaForm::GateUpSilu, 132, be.stream()), Error);
}

}  // namespace
}  // namespace nanovllm::test
