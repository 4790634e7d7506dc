// A tiny FP8 checkpoint in Qwen's fine-grained format, written by the test itself: one random Qwen3
// model (hidden 192: partial 128-blocks along K and N; q, k, v and gate, up of 128 rows each, so
// the packed parts fall on block boundaries) saved three ways:
//   f32  the random weights;
//   fp8  the projections as F8_E4M3 codes with 128 x 128 weight_scale_inv (amax / 448 per block,
//        blocks of different magnitudes) and the quantization_config of Qwen3-*-FP8;
//   deq  the fp8 model's values (code x scale) in F32: what an engine on `fp8` computes with
//        weight-only GEMMs.
// Used by the CPU test (unit/model/test_fp8_checkpoint.cpp) and the CUDA one (gpu/test_cuda_fp8_weights.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "nanovllm/utils/fp8.h"
#include "safetensors_writer.h"

namespace nanovllm::test {

struct Fp8Checkpoints {
  std::string f32, fp8, deq;  // directories
};

inline nlohmann::json fp8_fixture_config() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", 192},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 2},
          {"head_dim", 64},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"vocab_size", 320},
          {"bos_token_id", 0},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

inline nlohmann::json fp8_quantization_config() {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"activation_scheme", "dynamic"},
          {"weight_block_size", {128, 128}},
          {"modules_to_not_convert", {"lm_head"}}};
}

inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

inline Fp8Checkpoints write_fp8_checkpoints(const std::string& dir, uint32_t seed = 5) {
  const nlohmann::json cfg = fp8_fixture_config();
  const int64_t H = cfg["hidden_size"], I = cfg["intermediate_size"], V = cfg["vocab_size"];
  const int64_t q = int64_t(cfg["num_attention_heads"]) * int64_t(cfg["head_dim"]);
  const int64_t kv = int64_t(cfg["num_key_value_heads"]) * int64_t(cfg["head_dim"]), D = cfg["head_dim"];
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::uniform_int_distribution<int> mag(-3, 2);
  std::map<std::string, StTensor> f32, fp8, deq;
  auto plain = [&](const std::string& name, std::vector<int64_t> shape, float mean, float sd) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = mean + sd * g(rng);
    f32[name] = fp8[name] = deq[name] = {"F32", shape, f32_bytes(v)};
  };
  auto projection = [&](const std::string& name, int64_t N, int64_t K) {
    const int64_t B = 128, bn = (N + B - 1) / B, bk = (K + B - 1) / B;
    std::vector<float> w(size_t(N * K)), d(w.size()), s(size_t(bn * bk));
    std::vector<float> block_mag(s.size());
    for (auto& m : block_mag) m = std::ldexp(1.0f, mag(rng)) * 0.6f / std::sqrt(float(K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[size_t(n * K + k)] = g(rng) * block_mag[size_t((n / B) * bk + k / B)];
    std::string codes(w.size(), '\0');
    for (int64_t b0 = 0; b0 < bn; ++b0)
      for (int64_t b1 = 0; b1 < bk; ++b1) {
        float amax = 0;
        for (int64_t n = b0 * B; n < std::min(N, b0 * B + B); ++n)
          for (int64_t k = b1 * B; k < std::min(K, b1 * B + B); ++k)
            amax = std::max(amax, std::fabs(w[size_t(n * K + k)]));
        const float sc = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
        s[size_t(b0 * bk + b1)] = sc;
        for (int64_t n = b0 * B; n < std::min(N, b0 * B + B); ++n)
          for (int64_t k = b1 * B; k < std::min(K, b1 * B + B); ++k) {
            const uint8_t c = f32_to_e4m3(w[size_t(n * K + k)] / sc);
            codes[size_t(n * K + k)] = char(c);
            d[size_t(n * K + k)] = e4m3_to_f32(c) * sc;
          }
      }
    f32[name + ".weight"] = {"F32", {N, K}, f32_bytes(w)};
    deq[name + ".weight"] = {"F32", {N, K}, f32_bytes(d)};
    fp8[name + ".weight"] = {"F8_E4M3", {N, K}, codes};
    fp8[name + ".weight_scale_inv"] = {"F32", {bn, bk}, f32_bytes(s)};
  };
  plain("model.embed_tokens.weight", {V, H}, 0, 1);
  for (int64_t i = 0; i < int64_t(cfg["num_hidden_layers"]); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    projection(p + "self_attn.q_proj", q, H);
    projection(p + "self_attn.k_proj", kv, H);
    projection(p + "self_attn.v_proj", kv, H);
    projection(p + "self_attn.o_proj", H, q);
    plain(p + "self_attn.q_norm.weight", {D}, 1, 0.1f);
    plain(p + "self_attn.k_norm.weight", {D}, 1, 0.1f);
    projection(p + "mlp.gate_proj", I, H);
    projection(p + "mlp.up_proj", I, H);
    projection(p + "mlp.down_proj", H, I);
    plain(p + "input_layernorm.weight", {H}, 1, 0.1f);
    plain(p + "post_attention_layernorm.weight", {H}, 1, 0.1f);
  }
  plain("model.norm.weight", {H}, 1, 0.1f);
  plain("lm_head.weight", {V, H}, 0, 0.2f);
  Fp8Checkpoints out{dir + "/f32", dir + "/fp8", dir + "/deq"};
  for (const auto& [d, tensors, quantized] :
       {std::tuple{out.f32, &f32, false}, std::tuple{out.fp8, &fp8, true}, std::tuple{out.deq, &deq, false}}) {
    std::filesystem::create_directories(d);
    nlohmann::json c = cfg;
    if (quantized) c["quantization_config"] = fp8_quantization_config();
    std::ofstream(d + "/config.json") << c.dump(2);
    write_safetensors(d + "/model.safetensors", *tensors);
  }
  return out;
}

}  // namespace nanovllm::test
