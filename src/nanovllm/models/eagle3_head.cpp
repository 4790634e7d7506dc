// The EAGLE-3 head's weights and forward (eagle3_head.h).
#include "nanovllm/models/eagle3_head.h"

#include <cmath>
#include <cstring>
#include <set>

#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/weights.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

Eagle3Head::Eagle3Head(const Eagle3Config& cfg, Backend& be) : cfg_(cfg), be_(be) {
  const ModelConfig& m = cfg_.layer;
  const int64_t H = m.hidden_size, D = m.head_dim, Hq = m.num_attention_heads, Hkv = m.num_key_value_heads;
  fc_.create(be, H, 3 * H);
  for (RMSNorm* n : {&input_layernorm_, &hidden_norm_, &post_attention_layernorm_, &norm_})
    n->create(be, H, m.rms_norm_eps);
  qkv_proj_.create(be, (Hq + 2 * Hkv) * D, 2 * H);
  o_proj_.create(be, H, Hq * D);
  gate_up_proj_.create(be, 2 * m.intermediate_size, H);
  down_proj_.create(be, H, m.intermediate_size);
  attn_ = {Hq, Hkv, D, float(1.0 / std::sqrt(double(D))), 0};
  rope_ = rotary_embedding(m);
  lm_head_.weight = be.empty({cfg_.draft_vocab_size, H}, be.weight_dtype());
}

std::vector<WeightSpec> Eagle3Head::weight_specs(const std::string& p, bool own_embedding) {
  const ModelConfig& m = cfg_.layer;
  const int64_t H = m.hidden_size, I = m.intermediate_size, q = m.q_size(), kv = m.kv_size();
  std::vector<WeightSpec> s = {
      {"fc.weight", {H, 3 * H}, &fc_.weight},
      {p + "input_layernorm.weight", {H}, &input_layernorm_.weight},
      {p + "hidden_norm.weight", {H}, &hidden_norm_.weight},
      {p + "self_attn.q_proj.weight", {q, 2 * H}, &qkv_proj_.weight, 0},
      {p + "self_attn.k_proj.weight", {kv, 2 * H}, &qkv_proj_.weight, q},
      {p + "self_attn.v_proj.weight", {kv, 2 * H}, &qkv_proj_.weight, q + kv},
      {p + "self_attn.o_proj.weight", {H, q}, &o_proj_.weight},
      {p + "post_attention_layernorm.weight", {H}, &post_attention_layernorm_.weight},
      {p + "mlp.gate_proj.weight", {I, H}, &gate_up_proj_.weight, 0},
      {p + "mlp.up_proj.weight", {I, H}, &gate_up_proj_.weight, I},
      {p + "mlp.down_proj.weight", {H, I}, &down_proj_.weight},
      {"norm.weight", {H}, &norm_.weight},
      {"lm_head.weight", {cfg_.draft_vocab_size, H}, &lm_head_.weight},
  };
  if (own_embedding) s.push_back({"embed_tokens.weight", {m.vocab_size, H}, &embed_tokens_.weight});
  return s;
}

void Eagle3Head::load(const std::string& dir, const Tensor* target_embedding) {
  const int64_t V = cfg_.layer.vocab_size, H = cfg_.layer.hidden_size;
  if (dir.empty()) {  // dummy
    const bool own = target_embedding == nullptr;
    if (own) embed_tokens_.create(be_, V, H);
    load_dummy_weights(be_, weight_specs("midlayer.", own));
    d2t_.resize(size_t(cfg_.draft_vocab_size));
    for (size_t d = 0; d < d2t_.size(); ++d) d2t_[d] = int32_t(d);
    if (!own) embed_tokens_.weight = *target_embedding;
    return;
  }
  SafetensorsCheckpoint ckpt(dir);
  const std::string prefix = ckpt.find("midlayer.self_attn.q_proj.weight")   ? "midlayer."
                             : ckpt.find("layers.0.self_attn.q_proj.weight") ? "layers.0."
                                                                             : "";
  if (prefix.empty())
    throw LoadError(dir + ": no 'midlayer.self_attn.q_proj.weight' (nor 'layers.0.'): not an EAGLE-3 head checkpoint");
  const bool own = ckpt.find("embed_tokens.weight") != nullptr;
  if (own) embed_tokens_.create(be_, V, H);
  const std::vector<WeightSpec> specs = weight_specs(prefix, own);
  std::set<std::string> known = {"d2t", "t2d"};
  for (const WeightSpec& w : specs) known.insert(w.name);
  for (const std::string& name : ckpt.names())
    if (!known.count(name))
      throw LoadError(dir + ": tensor '" + name + "' is not part of the EAGLE-3 head we load (one " + prefix +
                      " decoder layer without biases or q/k norms, fc, norm, lm_head, d2t, t2d, embed_tokens)");
  load_weights(be_, ckpt, specs);
  load_d2t(&ckpt, dir);
  if (!own) {
    if (!target_embedding)
      throw LoadError(dir + ": the head has no embed_tokens.weight and the target's embedding is not available");
    embed_tokens_.weight = *target_embedding;
  }
}

void Eagle3Head::load_d2t(const SafetensorsCheckpoint* ckpt, const std::string& where) {
  const int64_t Vd = cfg_.draft_vocab_size, V = cfg_.layer.vocab_size;
  const TensorInfo* t = ckpt->find("d2t");
  d2t_.assign(size_t(Vd), 0);
  if (!t) {
    if (Vd != V)
      throw LoadError(where + ": missing 'd2t' (draft_vocab_size " + std::to_string(Vd) + " < vocab_size " +
                      std::to_string(V) + " needs the draft -> target id offsets)");
    for (int64_t d = 0; d < Vd; ++d) d2t_[size_t(d)] = int32_t(d);
    return;
  }
  if ((t->dtype != DType::I64 && t->dtype != DType::I32) || t->shape != std::vector<int64_t>{Vd})
    throw LoadError(where + ": 'd2t' must be an int64 tensor of shape [" + std::to_string(Vd) + "] (draft_vocab_size)");
  std::vector<bool> seen(size_t(V), false);
  for (int64_t d = 0; d < Vd; ++d) {
    int64_t off = 0;
    if (t->dtype == DType::I64) {
      std::memcpy(&off, static_cast<const char*>(t->data) + d * 8, 8);
    } else {
      int32_t o32 = 0;
      std::memcpy(&o32, static_cast<const char*>(t->data) + d * 4, 4);
      off = o32;
    }
    const int64_t id = d + off;
    if (off < -V || off > V || id < 0 || id >= V || seen[size_t(id)])
      throw LoadError(where + ": 'd2t'[" + std::to_string(d) + "] = " + std::to_string(off) + " maps draft id " +
                      std::to_string(d) + " outside the target's vocabulary of " + std::to_string(V) +
                      " or onto an id mapped already");
    seen[size_t(id)] = true;
    d2t_[size_t(d)] = int32_t(id);
  }
}

Tensor Eagle3Head::fuse(const Tensor& aux) const { return fc_.forward(be_, aux); }

Eagle3Head::Output Eagle3Head::forward(const Tensor& ids, const Tensor& positions, const Tensor& hidden,
                                       LayerKVCache& kv, const AttentionMetadata& md) const {
  const int64_t T = ids.size(0), H = cfg_.layer.hidden_size;
  const DType act = be_.act_dtype();
  // [input_layernorm(e); hidden_norm(h)] stacked as [2T, H], then interleaved by rows into [T, 2H]:
  // row t of the concatenation is stacked rows t and T + t.
  Tensor e = embed_tokens_.forward(be_, ids);
  Tensor stack = be_.empty({2 * T, H}, act);
  Tensor en = stack.rows(0, T), hn = stack.rows(T, 2 * T);
  be_.rms_norm(e, input_layernorm_.weight, input_layernorm_.eps, en);
  be_.rms_norm(hidden, hidden_norm_.weight, hidden_norm_.eps, hn);
  Tensor residual = be_.empty({T, H}, act);
  be_.cast(cfg_.norm_before_residual ? hn : hidden, residual);
  std::vector<int32_t> order(size_t(2 * T));
  for (int64_t t = 0; t < T; ++t) {
    order[size_t(2 * t)] = int32_t(t);
    order[size_t(2 * t + 1)] = int32_t(T + t);
  }
  Tensor cat = be_.empty({T, 2 * H}, act);
  Tensor cat_rows = cat.view({2 * T, H});
  be_.gather_rows(stack, order, cat_rows);
  Tensor qkv = qkv_proj_.forward(be_, cat);  // [T, (Hq + 2 Hkv) * D]
  be_.qk_norm_rope_store(qkv, Tensor(), Tensor(), positions, kv.k, kv.v, attn_.num_heads, attn_.num_kv_heads,
                         attn_.head_dim, cfg_.layer.rms_norm_eps, rope_, md, kv.scales);
  Tensor o = o_proj_.forward(be_, attn_.forward(be_, qkv, kv, md));
  Tensor act_mid = post_attention_layernorm_.forward_residual_linear(be_, o, residual, gate_up_proj_, true);
  Tensor x = down_proj_.forward(be_, act_mid);
  norm_.forward_residual(be_, x, residual);
  return {x, residual};
}

Tensor Eagle3Head::compute_logits(const Tensor& normed, const std::vector<int32_t>& rows) const {
  return lm_head_.forward(be_, normed, rows);
}

}  // namespace nanovllm
