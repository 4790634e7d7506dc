// Writes tiny EAGLE-3 head checkpoints with vLLM's key names (models/eagle3_head.h) for the tests:
// F32 weights of a seeded uniform distribution, a d2t mapping onto a seeded subset of the target's
// vocabulary, config.json in the published heads' form (LlamaForCausalLMEagle3, eagle_config).
// The spec's fields let a test break one thing at a time (a bad key, another vocabulary, no d2t).
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "safetensors_writer.h"

namespace nanovllm::test {

struct Eagle3HeadSpec {
  int64_t hidden = 96, heads = 2, kv_heads = 1, head_dim = 32, intermediate = 64;
  int64_t vocab = 700, draft_vocab = 300;  // vocab: the target's (tiny-qwen3-untied)
  double rope_theta = 10000.0, eps = 1e-6;
  bool own_embedding = false;  // embed_tokens.weight in the checkpoint
  bool with_d2t = true;
  std::string extra_tensor;  // a name outside the layout: refused
  nlohmann::json extra_config = nlohmann::json::object();
  uint32_t seed = 1;
};

// The tensors by name (F32 values; d2t as offsets), also kept for reference computations.
struct Eagle3HeadWeights {
  std::map<std::string, std::vector<float>> f32;
  std::vector<int64_t> d2t;  // target id of draft id d: d + d2t[d]
};

inline Eagle3HeadWeights eagle3_head_weights(const Eagle3HeadSpec& s) {
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<float> u(-0.15f, 0.15f);
  Eagle3HeadWeights w;
  const int64_t H = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, I = s.intermediate;
  auto mat = [&](const std::string& name, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(rng);
    w.f32[name] = std::move(v);
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> v(static_cast<size_t>(H));
    for (auto& x : v) x = 1.0f + u(rng);
    w.f32[name] = std::move(v);
  };
  mat("fc.weight", H * 3 * H);
  for (const char* n : {"input_layernorm", "hidden_norm", "post_attention_layernorm"})
    norm(std::string("midlayer.") + n + ".weight");
  mat("midlayer.self_attn.q_proj.weight", q * 2 * H);
  mat("midlayer.self_attn.k_proj.weight", kv * 2 * H);
  mat("midlayer.self_attn.v_proj.weight", kv * 2 * H);
  mat("midlayer.self_attn.o_proj.weight", H * q);
  mat("midlayer.mlp.gate_proj.weight", I * H);
  mat("midlayer.mlp.up_proj.weight", I * H);
  mat("midlayer.mlp.down_proj.weight", H * I);
  norm("norm.weight");
  mat("lm_head.weight", s.draft_vocab * H);
  if (s.own_embedding) mat("embed_tokens.weight", s.vocab * H);
  std::vector<int64_t> ids(static_cast<size_t>(s.vocab));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(size_t(s.draft_vocab));
  std::sort(ids.begin(), ids.end());
  for (int64_t d = 0; d < s.draft_vocab; ++d) w.d2t.push_back(ids[size_t(d)] - d);
  return w;
}

inline std::vector<int64_t> eagle3_tensor_shape(const Eagle3HeadSpec& s, const std::string& name) {
  const int64_t H = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim, I = s.intermediate;
  if (name == "fc.weight") return {H, 3 * H};
  if (name.ends_with("norm.weight")) return {H};
  if (name.ends_with("q_proj.weight")) return {q, 2 * H};
  if (name.ends_with("k_proj.weight") || name.ends_with("v_proj.weight")) return {kv, 2 * H};
  if (name.ends_with("o_proj.weight")) return {H, q};
  if (name.ends_with("gate_proj.weight") || name.ends_with("up_proj.weight")) return {I, H};
  if (name.ends_with("down_proj.weight")) return {H, I};
  if (name == "lm_head.weight") return {s.draft_vocab, H};
  return {s.vocab, H};  // embed_tokens
}

inline Eagle3HeadWeights write_eagle3_head(const std::string& dir, const Eagle3HeadSpec& s) {
  Eagle3HeadWeights w = eagle3_head_weights(s);
  std::map<std::string, StTensor> out;
  for (const auto& [name, v] : w.f32) {
    std::string bytes(v.size() * 4, '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    out[name] = {"F32", eagle3_tensor_shape(s, name), bytes};
  }
  if (s.with_d2t) {
    std::string bytes(w.d2t.size() * 8, '\0');
    std::memcpy(bytes.data(), w.d2t.data(), bytes.size());
    out["d2t"] = {"I64", {s.draft_vocab}, bytes};
    out["t2d"] = {"BOOL", {s.vocab}, std::string(size_t(s.vocab), '\1')};
  }
  if (!s.extra_tensor.empty()) out[s.extra_tensor] = {"F32", {s.hidden}, std::string(size_t(s.hidden) * 4, '\0')};
  write_safetensors(dir + "/model.safetensors", out);
  nlohmann::json c = {{"architectures", {"LlamaForCausalLMEagle3"}},
                      {"model_type", "llama"},
                      {"hidden_size", s.hidden},
                      {"intermediate_size", s.intermediate},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"head_dim", s.head_dim},
                      {"num_hidden_layers", 1},
                      {"vocab_size", s.vocab},
                      {"draft_vocab_size", s.draft_vocab},
                      {"rms_norm_eps", s.eps},
                      {"rope_theta", s.rope_theta},
                      {"max_position_embeddings", 1024},
                      {"hidden_act", "silu"},
                      {"tie_word_embeddings", false},
                      {"eagle_config", {{"use_aux_hidden_state", true}}}};
  c.update(s.extra_config);
  std::ofstream(dir + "/config.json") << c.dump(2);
  return w;
}

}  // namespace nanovllm::test
