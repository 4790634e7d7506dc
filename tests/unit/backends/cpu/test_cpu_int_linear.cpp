// The CPU backend's group-quantized integer weights (cpu_int_weights.cpp): linear_quantized with U4
// and U8 codes, zero points and act order against a reference computed here from the codes, the
// fused SiLU path, quantize_weight's usual schemes (awq with zero points, gptq and
// compressed-tensors symmetric, groups of 128 or one a row where 128 does not divide K), and whole
// engines with --quantization awq|gptq|compressed-tensors (dummy weights too) near the unquantized
// ones; Qwen3-MoE refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/error.h"
#include "quantized_engine_checks.h"
#include "tiny_engine.h"

using namespace nanovllm;

namespace {

struct Layer {
  int64_t N, K, G;
  DType d;
  std::vector<uint8_t> q;  // [N, K] one code a byte (canonical column order)
  std::vector<float> scale, zero;
  std::vector<int32_t> perm;
  Tensor codes;
  WeightScales scales;
};

Layer random_layer(int64_t N, int64_t K, int64_t G, DType d, bool zeros, bool act_order, uint32_t seed) {
  std::mt19937 rng(seed);
  const int qmax = d == DType::U4 ? 15 : 255;
  Layer l{N, K, G, d, std::vector<uint8_t>(size_t(N * K)), std::vector<float>(size_t(N * K / G)), {}, {}, {}, {}};
  std::uniform_int_distribution<int> code(0, qmax);
  std::uniform_real_distribution<float> sc(0.001f, 0.01f);
  for (auto& c : l.q) c = uint8_t(code(rng));
  for (auto& s : l.scale) s = sc(rng);
  l.codes = Tensor::host({N, K}, d);
  uint8_t* p = l.codes.data<uint8_t>();
  std::fill(p, p + l.codes.nbytes(), uint8_t(0));
  for (int64_t i = 0; i < N * K; ++i)
    if (d == DType::U4)
      p[i / 2] |= uint8_t(l.q[size_t(i)] << (4 * (i % 2)));
    else
      p[i] = l.q[size_t(i)];
  l.scales.block_k = G;
  l.scales.scale = Tensor::host({N, K / G}, DType::F32);
  std::copy(l.scale.begin(), l.scale.end(), l.scales.scale.data<float>());
  if (zeros) {
    l.zero.resize(l.scale.size());
    for (auto& z : l.zero) z = float(code(rng));
    l.scales.zero = Tensor::host({N, K / G}, DType::F32);
    std::copy(l.zero.begin(), l.zero.end(), l.scales.zero.data<float>());
  }
  if (act_order) {
    l.perm.resize(size_t(K));
    std::iota(l.perm.begin(), l.perm.end(), 0);
    std::shuffle(l.perm.begin(), l.perm.end(), rng);
    l.scales.perm = Tensor::host({K}, DType::I32);
    std::copy(l.perm.begin(), l.perm.end(), l.scales.perm.data<int32_t>());
  }
  return l;
}

// out[t][n] = sum_k x[t][perm[k]] * (q - zero) * scale, in double.
std::vector<double> reference(const Layer& l, const std::vector<float>& x, int64_t T) {
  const float mid = l.d == DType::U4 ? 8.0f : 128.0f;
  std::vector<double> out(size_t(T * l.N), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < l.N; ++n)
      for (int64_t k = 0; k < l.K; ++k) {
        const size_t g = size_t(n * (l.K / l.G) + k / l.G);
        const double v = (double(l.q[size_t(n * l.K + k)]) - (l.zero.empty() ? mid : l.zero[g])) * l.scale[g];
        out[size_t(t * l.N + n)] += double(x[size_t(t * l.K + (l.perm.empty() ? k : l.perm[size_t(k)]))]) * v;
      }
  return out;
}

TEST(CpuIntLinear, MatchesTheReference) {
  CpuBackend cpu(2);
  Backend& be = cpu;                    // the dispatching linear(x, w, scales, out)
  const int64_t T = 3, N = 80, K = 96;  // N above one 64-row block of the kernel
  for (auto [d, G, zeros, act] : {std::tuple{DType::U4, int64_t(32), true, false},
                                  {DType::U4, int64_t(16), false, true},
                                  {DType::U8, int64_t(96), true, true},
                                  {DType::U8, int64_t(32), false, false}}) {
    const Layer l = random_layer(N, K, G, d, zeros, act, uint32_t(G + zeros * 7 + act * 13));
    std::mt19937 rng(3);
    std::normal_distribution<float> g(0, 1);
    Tensor x = be.empty({T, K}, DType::F32), out = be.empty({T, N}, DType::F32);
    std::vector<float> xv(size_t(T * K));
    for (auto& v : xv) v = g(rng);
    std::copy(xv.begin(), xv.end(), x.data<float>());
    be.linear(x, l.codes, l.scales, out);
    const std::vector<double> want = reference(l, xv, T);
    double worst = 0;
    for (int64_t i = 0; i < T * N; ++i) worst = std::max(worst, std::abs(out.data<float>()[i] - want[size_t(i)]));
    EXPECT_LT(worst, 1e-4) << dtype_name(d) << " G " << G << (zeros ? " zeros" : "") << (act ? " perm" : "");
    // The gated MLP's fused form: silu(gate) * up over the same codes.
    Tensor gate_up = be.empty({T, N}, DType::F32), fused = be.empty({T, N / 2}, DType::F32);
    Tensor plain = be.empty({T, N / 2}, DType::F32);
    be.linear(x, l.codes, l.scales, gate_up);
    be.silu_and_mul(gate_up, plain);
    be.linear_silu_mul(x, l.codes, l.scales, fused);
    for (int64_t i = 0; i < T * N / 2; ++i) EXPECT_FLOAT_EQ(fused.data<float>()[i], plain.data<float>()[i]);
  }
}

TEST(CpuIntLinear, QuantizeWeightUsesTheFormatsUsualScheme) {
  CpuBackend be(2);
  auto quantize = [&](Quantization q, int64_t K) {
    Tensor w = be.empty({4, K}, DType::F32);
    for (int64_t i = 0; i < 4 * K; ++i) w.data<float>()[i] = std::sin(float(i)) * 0.02f;
    Tensor codes;
    WeightScales s;
    be.quantize_weight(w, q, codes, s);
    return std::pair{codes, s};
  };
  EXPECT_TRUE(be.supports_quantization(Quantization::AWQ));
  EXPECT_TRUE(be.supports_quantization(Quantization::CompressedTensors));
  auto [awq, awq_s] = quantize(Quantization::AWQ, 256);
  EXPECT_EQ(awq.dtype(), DType::U4);
  EXPECT_EQ(awq_s.block_k, 128);
  EXPECT_TRUE(awq_s.zero.defined());
  auto [gptq, gptq_s] = quantize(Quantization::GPTQ, 96);
  EXPECT_EQ(gptq_s.block_k, 96);  // 128 does not divide 96: one group a row
  EXPECT_FALSE(gptq_s.zero.defined());
  EXPECT_EQ(quantize(Quantization::CompressedTensors, 200).second.block_k, 200);
  try {
    quantize(Quantization::GPTQ, 7);
    ADD_FAILURE() << "odd K accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--quantization gptq: a weight with 7 input columns"), std::string::npos)
        << e.what();
  }
}

// Round to nearest in 4 bits on the fixtures' random weights (one group a row): logits cosine
// 0.88-0.97 over the greedy steps (exactness is test_int_checkpoint.cpp's: checkpoint vs its values).
TEST(CpuIntLinear, EnginesNearTheUnquantizedOnes) {
  test::expect_quantized_engine_near_unquantized(Quantization::GPTQ, 0.85);
}

// --load-format dummy --quantization awq|compressed-tensors: the random weights quantized at load;
// Qwen3-MoE (dummy or its checkpoint) with the attention projections and the dense layer's MLP as
// codes, the experts rounded to the scheme and kept dequantized (models/int_experts.h).
TEST(CpuIntLinear, DummyWeightsQuantizedAtLoad) {
  for (auto [fx, dummy, q] : {std::tuple{"tiny-qwen3-untied", true, Quantization::AWQ},
                              std::tuple{"tiny-qwen3-untied", true, Quantization::CompressedTensors},
                              std::tuple{"tiny-qwen3-moe", true, Quantization::AWQ},
                              std::tuple{"tiny-qwen3-moe", false, Quantization::GPTQ}}) {
    EngineConfig cfg = test::tiny_cfg(test::fixture(fx));
    cfg.load_dummy = dummy;
    LLMEngine ref(cfg);
    cfg.quantization = q;
    LLMEngine quantized(cfg);
    EXPECT_EQ(quantized.model_runner().quantization(), q);
    const test::Agreement a = test::compare_greedy(ref, quantized, 2, 8);
    std::printf("%s%s, %s vs unquantized: %zu/%zu tokens, worst cosine %.6f\n", fx, dummy ? " (dummy weights)" : "",
                quantization_name(q), a.same, a.total, a.worst_cosine);
    EXPECT_GE(a.worst_cosine, 0.85) << fx;
    EXPECT_LT(a.worst_cosine, 1.0) << fx;
  }
}

}  // namespace
