#include "nanovllm/models/qwen3.h"

#include <cmath>

#include "nanovllm/utils/error.h"

namespace nanovllm {

Tensor Qwen3Attention::forward(Backend& be, const Tensor& positions, const Tensor& x, LayerKVCache& kv,
                               const AttentionMetadata& md) {
  Tensor qkv = qkv_proj.forward(be, x);  // [T, (Hq + 2 Hkv) * D]
  // q/k RMSNorm + RoPE in place, and this step's k/v into the cache pages at md.slot_mapping.
  be.qk_norm_rope_store(qkv, q_norm.weight, k_norm.weight, positions, kv.k, kv.v, attn.num_heads, attn.num_kv_heads,
                        attn.head_dim, q_norm.eps, rope_theta, md);
  Tensor o = attn.forward(be, qkv, kv, md);  // [T, Hq * D]
  return o_proj.forward(be, o);              // [T, H]
}

Tensor Qwen3MLP::forward(Backend& be, const Tensor& x) const {
  return down_proj.forward(be, gate_up_silu(be, x, gate_up_proj.weight));  // [T, I] -> [T, H]
}

void Qwen3DecoderLayer::forward(Backend& be, const Tensor& positions, Tensor& x, Tensor& residual, LayerKVCache& kv,
                                const AttentionMetadata& md) {
  if (!residual.defined()) {
    residual = x;
    x = input_layernorm.forward(be, x);
  } else {
    input_layernorm.forward_residual(be, x, residual);
  }
  x = self_attn.forward(be, positions, x, kv, md);
  post_attention_layernorm.forward_residual(be, x, residual);
  x = mlp.forward(be, x);
}

Qwen3ForCausalLM::Qwen3ForCausalLM(const ModelConfig& cfg, Backend& be) : cfg_(cfg), be_(be) {
  const int64_t H = cfg.hidden_size, D = cfg.head_dim, I = cfg.intermediate_size;
  embed_tokens_.create(be, cfg.vocab_size, H);
  layers_.resize(size_t(cfg.num_hidden_layers));
  for (auto& l : layers_) {
    l.self_attn.qkv_proj.create(be, cfg.q_size() + 2 * cfg.kv_size(), H);
    l.self_attn.o_proj.create(be, H, cfg.q_size());
    l.self_attn.q_norm.create(be, D, cfg.rms_norm_eps);
    l.self_attn.k_norm.create(be, D, cfg.rms_norm_eps);
    l.self_attn.attn = {cfg.num_attention_heads, cfg.num_key_value_heads, D, float(1.0 / std::sqrt(double(D)))};
    l.self_attn.rope_theta = float(cfg.rope_theta);
    l.mlp.gate_up_proj.create(be, 2 * I, H);
    l.mlp.down_proj.create(be, H, I);
    l.input_layernorm.create(be, H, cfg.rms_norm_eps);
    l.post_attention_layernorm.create(be, H, cfg.rms_norm_eps);
  }
  norm_.create(be, H, cfg.rms_norm_eps);
  if (!cfg.tie_word_embeddings) lm_head_weight_ = be.empty({cfg.vocab_size, H}, be.weight_dtype());
}

std::vector<WeightSpec> Qwen3ForCausalLM::weight_specs() {
  const int64_t H = cfg_.hidden_size, D = cfg_.head_dim, I = cfg_.intermediate_size;
  const int64_t q = cfg_.q_size(), kv = cfg_.kv_size();
  std::vector<WeightSpec> s;
  s.push_back({"model.embed_tokens.weight", {cfg_.vocab_size, H}, &embed_tokens_.weight});
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "self_attn.q_proj.weight", {q, H}, &l.self_attn.qkv_proj.weight, 0});
    s.push_back({p + "self_attn.k_proj.weight", {kv, H}, &l.self_attn.qkv_proj.weight, q});
    s.push_back({p + "self_attn.v_proj.weight", {kv, H}, &l.self_attn.qkv_proj.weight, q + kv});
    s.push_back({p + "self_attn.o_proj.weight", {H, q}, &l.self_attn.o_proj.weight});
    s.push_back({p + "self_attn.q_norm.weight", {D}, &l.self_attn.q_norm.weight});
    s.push_back({p + "self_attn.k_norm.weight", {D}, &l.self_attn.k_norm.weight});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}, &l.mlp.gate_up_proj.weight, 0});
    s.push_back({p + "mlp.up_proj.weight", {I, H}, &l.mlp.gate_up_proj.weight, I});
    s.push_back({p + "mlp.down_proj.weight", {H, I}, &l.mlp.down_proj.weight});
    s.push_back({p + "input_layernorm.weight", {H}, &l.input_layernorm.weight});
    s.push_back({p + "post_attention_layernorm.weight", {H}, &l.post_attention_layernorm.weight});
  }
  s.push_back({"model.norm.weight", {H}, &norm_.weight});
  if (!cfg_.tie_word_embeddings) s.push_back({"lm_head.weight", {cfg_.vocab_size, H}, &lm_head_weight_});
  return s;
}

void Qwen3ForCausalLM::finalize_weights() {
  lm_head_.weight = cfg_.tie_word_embeddings ? embed_tokens_.weight : lm_head_weight_;
}

Tensor Qwen3ForCausalLM::forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv,
                                 const AttentionMetadata& md) {
  if (kv.size() != layers_.size()) throw Error("qwen3: KV cache has " + std::to_string(kv.size()) + " layers, model has " + std::to_string(layers_.size()));
  Tensor x = embed_tokens_.forward(be_, ids);  // [T, H]
  Tensor residual;
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i].forward(be_, positions, x, residual, kv[i], md);
  norm_.forward_residual(be_, x, residual);
  return x;
}

Tensor Qwen3ForCausalLM::compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) {
  return lm_head_.forward(be_, hidden, last_rows);
}

std::unique_ptr<CausalLM> create_model(const ModelConfig& cfg, Backend& be) {
  if (cfg.architecture == "Qwen3ForCausalLM") return std::make_unique<Qwen3ForCausalLM>(cfg, be);
  throw LoadError("unsupported architecture '" + cfg.architecture + "'");
}

}  // namespace nanovllm
