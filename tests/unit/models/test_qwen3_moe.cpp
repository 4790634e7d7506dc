// Qwen3-MoE (Qwen3MoeForCausalLM): the real Qwen3-30B-A3B config.json parses into the preset (and
// the model card's 30.5B parameters), which layers are sparse as transformers' Qwen3MoeDecoderLayer
// decides, the refusals; and the CPU backend's router and expert ops against the formulas written
// out again here in double precision (the CPU backend is the oracle of the CUDA kernels, so it is
// checked on its own). The transformers fixtures are in test_hf_families.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "config_test_util.h"
#include "nanovllm/backends/backend.h"
#include "nanovllm/config/config.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;
using nlohmann::json;

namespace {

// Qwen/Qwen3-30B-A3B's config.json as published (keys we do not read left in).
const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
  "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

using test::config_error;
using test::parse_config;

}  // namespace

TEST(Qwen3Moe, RealConfigMatchesPresetAndParameterCount) {
  const ModelConfig c = parse_model_config(kQwen3_30B_A3B, "qwen3-30b-a3b/config.json");
  const ModelConfig p = *preset_model_config("qwen3-30b-a3b");
  for (const ModelConfig* m : {&c, &p}) {
    EXPECT_EQ(m->architecture, "Qwen3MoeForCausalLM");
    EXPECT_EQ(m->vocab_size, 151936);
    EXPECT_EQ(m->hidden_size, 2048);
    EXPECT_EQ(m->num_hidden_layers, 48);
    EXPECT_EQ(m->num_attention_heads, 32);
    EXPECT_EQ(m->num_key_value_heads, 4);
    EXPECT_EQ(m->head_dim, 128);
    EXPECT_EQ(m->num_experts, 128);
    EXPECT_EQ(m->num_experts_per_tok, 8);
    EXPECT_EQ(m->moe_intermediate_size, 768);
    EXPECT_TRUE(m->norm_topk_prob);
    EXPECT_EQ(m->max_position_embeddings, 40960);
    EXPECT_EQ(m->rope_theta, 1000000.0);
    EXPECT_FALSE(m->tie_word_embeddings);
    EXPECT_EQ(m->sliding_window, 0);
    for (int64_t i = 0; i < 48; ++i) EXPECT_TRUE(m->is_moe_layer(i)) << i;
    // Embedding and LM head 2 x 151936 x 2048; per layer attention 18.9M, q/k norms, 2 norms and
    // the router + 128 experts of 3 x 768 x 2048: the model card's 30.5B.
    EXPECT_EQ(m->checked_num_parameters(), 30532122624);
  }
}

TEST(Qwen3Moe, SparseLayersAsTransformersDecides) {
  json j = json::parse(kQwen3_30B_A3B);
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;  // (i + 1) % 2 == 0: layers 1, 3, 5
  j["mlp_only_layers"] = {3};    // ... but not 3
  const ModelConfig c = parse_config(j);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c.is_moe_layer(i), i == 1 || i == 5) << i;
  // Absent keys: Qwen3MoeConfig's defaults (norm_topk_prob false, 128 experts, top 8, 768).
  for (const char* k : {"norm_topk_prob", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                        "decoder_sparse_step", "mlp_only_layers"})
    j.erase(k);
  const ModelConfig d = parse_config(j);
  EXPECT_FALSE(d.norm_topk_prob);
  EXPECT_EQ(d.num_experts, 128);
  EXPECT_EQ(d.num_experts_per_tok, 8);
  EXPECT_EQ(d.moe_intermediate_size, 768);
  for (int64_t i = 0; i < 6; ++i) EXPECT_TRUE(d.is_moe_layer(i)) << i;
  j["num_local_experts"] = 16;  // transformers 5's spelling (attribute_map)
  EXPECT_EQ(parse_config(j).num_experts, 16);
  // A dense family never has MoE layers.
  json dense = json::parse(kQwen3_30B_A3B);
  dense["architectures"] = {"Qwen3ForCausalLM"};
  dense["model_type"] = "qwen3";
  EXPECT_EQ(parse_config(dense).num_experts, 0);
  EXPECT_FALSE(parse_config(dense).is_moe_layer(0));
}

TEST(Qwen3Moe, BadConfigsAreRefusedByKey) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  for (const Case& k : {
           Case{"num_experts_per_tok", 129, "'num_experts_per_tok' must be an integer in [1, 128] (got 129)"},
           Case{"num_experts", 0, "'num_experts' must be an integer in [1, 4096] (got 0)"},
           Case{"moe_intermediate_size", -1, "'moe_intermediate_size' must be an integer in [1, "},
           Case{"mlp_only_layers", 3, "'mlp_only_layers' must be a list of layer indices (got 3)"},
           Case{"mlp_only_layers", json::array({48}), "'mlp_only_layers[0]' must be an integer in [0, 47] (got 48)"},
           Case{"decoder_sparse_step", 0, "'decoder_sparse_step' must be an integer in [1, "},
           Case{"norm_topk_prob", "yes", "'norm_topk_prob' must be true or false"},
           Case{"num_local_experts", 64, "'num_local_experts' differs from num_experts (128)"},
           Case{"shared_expert_intermediate_size", 512, "shared experts are not implemented"},
       }) {
    json j = json::parse(kQwen3_30B_A3B);
    j[k.key] = k.value;
    EXPECT_NE(config_error(j).find(k.message), std::string::npos) << k.key << ": " << config_error(j);
  }
  const ModelConfig c = parse_model_config(kQwen3_30B_A3B, "c");
  EXPECT_NO_THROW(validate_tensor_parallel(c, 4));
  ModelConfig odd = c;
  odd.moe_intermediate_size = 770;
  try {
    validate_tensor_parallel(odd, 4);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the model's moe_intermediate_size (770)"), std::string::npos)
        << e.what();
  }
}

namespace {

Tensor host_tensor(Backend& be, const Shape& shape, const std::vector<float>& v) {
  Tensor t = be.empty(shape, DType::F32);
  be.upload(v.data(), DType::F32, t);
  return t;
}

std::vector<float> randn(size_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> d(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

// The router: softmax, the top k in descending order, renormalized or not, ties to the lower index.
TEST(Qwen3Moe, CpuRouterTopK) {
  auto be = make_cpu_backend(1);
  std::mt19937 rng(3);
  const int64_t T = 7, E = 12, K = 3;
  auto l = randn(size_t(T * E), rng, 2.0f);
  l[5 * E + 4] = l[5 * E + 9] = 50;  // row 5: a tie for first place
  const Tensor logits = host_tensor(*be, {T, E}, l);
  for (bool renorm : {false, true}) {
    Tensor w = be->empty({T, K}, DType::F32), ids = be->empty({T, K}, DType::I32);
    be->moe_topk(logits, K, renorm, w, ids);
    for (int64_t t = 0; t < T; ++t) {
      double mx = -1e30, sum = 0;
      for (int64_t e = 0; e < E; ++e) mx = std::max(mx, double(l[size_t(t * E + e)]));
      std::vector<double> p(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[size_t(t * E + e)] - mx);
      std::vector<int> order(static_cast<size_t>(E));
      for (int e = 0; e < E; ++e) order[size_t(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
      double chosen = 0;
      for (int64_t j = 0; j < K; ++j) chosen += p[size_t(order[size_t(j)])] / sum;
      for (int64_t j = 0; j < K; ++j) {
        EXPECT_EQ(ids.data<int32_t>()[t * K + j], order[size_t(j)]) << t << " " << j;
        const double want = p[size_t(order[size_t(j)])] / sum / (renorm ? chosen : 1.0);
        EXPECT_NEAR(w.data<float>()[t * K + j], want, 1e-6) << t << " " << j;
      }
    }
    EXPECT_EQ(ids.data<int32_t>()[5 * K], 4);  // the tie: the lower index first
    EXPECT_EQ(ids.data<int32_t>()[5 * K + 1], 9);
  }
  Tensor w = be->empty({T, K}, DType::F32), ids = be->empty({T, K}, DType::I32);
  EXPECT_THROW(be->moe_topk(logits, E + 1, true, w, ids), Error);
  Tensor bad = be->empty({T, K + 1}, DType::F32);
  EXPECT_THROW(be->moe_topk(logits, K, true, bad, ids), Error);
}

// The experts and the combine against a per-token loop in double, with an expert nobody chose,
// one that several rows of a token's top-k could not both pick, and a repeated expert across tokens.
TEST(Qwen3Moe, CpuExpertsAgainstPerTokenLoop) {
  for (auto precision : {CpuPrecision::Exact, CpuPrecision::Fast}) {
    auto be = make_cpu_backend(2, precision);
    std::mt19937 rng(11);
    const int64_t T = 9, H = 24, I = 10, E = 5, K = 2;
    const auto x = randn(size_t(T * H), rng, 1.0f), w13 = randn(size_t(E * 2 * I * H), rng, 0.2f),
               w2 = randn(size_t(E * H * I), rng, 0.2f), rw = randn(size_t(T * K), rng, 0.5f);
    std::vector<int32_t> ids(static_cast<size_t>(T * K));
    for (int64_t t = 0; t < T; ++t) {  // expert 3 never chosen; expert 0 by every token
      ids[size_t(t * K)] = 0;
      ids[size_t(t * K + 1)] = int32_t(t % 3 == 0 ? 4 : 1 + t % 2);  // 1, 2 or 4
    }
    Tensor tw13 = be->empty({E, 2 * I, H}, be->weight_dtype()), tw2 = be->empty({E, H, I}, be->weight_dtype());
    be->upload(w13.data(), DType::F32, tw13);
    be->upload(w2.data(), DType::F32, tw2);
    Tensor tids = be->empty({T, K}, DType::I32);
    be->upload(ids.data(), DType::I32, tids);
    const Tensor tx = host_tensor(*be, {T, H}, x), trw = host_tensor(*be, {T, K}, rw);
    Tensor out = be->empty({T, H}, DType::F32);
    be->moe_experts(tx, tw13, tw2, trw, tids, out);
    // The weights as the backend holds them (BF16-rounded on the fast path).
    const auto hw13 = be->to_host_f32(tw13), hw2 = be->to_host_f32(tw2);
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double y = 0;
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = ids[size_t(t * K + j)];
          double d = 0;
          for (int64_t i = 0; i < I; ++i) {
            double g = 0, u = 0;
            for (int64_t c = 0; c < H; ++c) {
              g += double(hw13[size_t((e * 2 * I + i) * H + c)]) * x[size_t(t * H + c)];
              u += double(hw13[size_t((e * 2 * I + I + i) * H + c)]) * x[size_t(t * H + c)];
            }
            d += double(hw2[size_t((e * H + h) * I + i)]) * (g / (1 + std::exp(-g)) * u);
          }
          y += rw[size_t(t * K + j)] * d;
        }
        worst = std::max(worst, std::abs(y - out.data<float>()[t * H + h]));
      }
    EXPECT_LT(worst, precision == CpuPrecision::Exact ? 1e-5 : 2e-2) << int(precision);
    ids[3] = int32_t(E);  // out of range
    be->upload(ids.data(), DType::I32, tids);
    EXPECT_THROW(be->moe_experts(tx, tw13, tw2, trw, tids, out), Error);
    Tensor bad_w2 = be->empty({E, H, I + 1}, be->weight_dtype());
    EXPECT_THROW(be->moe_experts(tx, tw13, bad_w2, trw, tids, out), Error);
  }
}
