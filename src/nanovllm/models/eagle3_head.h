// An EAGLE-3 draft head (vLLM's Eagle3LlamaForCausalLM, SafeAILab/EAGLE's EAGLE-3 model) over the
// Backend ops, so every backend runs it unchanged. Shapes: T rows, H hidden (the target's), Hq/Hkv
// heads of D, I intermediate, V the target's vocabulary, Vd the head's (draft_vocab_size).
//
//   fuse:    aux [T, 3H] (the target's low, mid, high hidden states)  -> fc -> g [T, H]
//   forward: e = embed(token) (the head's embed_tokens or the target's); h = g or the head's own
//            previous prenorm output
//            x = [input_layernorm(e), hidden_norm(h)]               [T, 2H]  (concatenated)
//            residual = h (norm_before_residual: hidden_norm(h))
//            residual += o_proj(attn(rope(qkv_proj(x))))              (its own 1-layer KV cache)
//            residual += down(silu(gate) * up)(post_attention_layernorm(residual))
//            prenorm = residual; normed = norm(prenorm)             both [T, H]
//   logits:  lm_head(normed) [B, Vd]; draft id d is target id d + d2t[d] (draft_to_target()).
//
// Checkpoint (vLLM's key names): fc.weight [H, 3H], midlayer.{hidden_norm,input_layernorm,
// post_attention_layernorm}.weight, midlayer.self_attn.{q,k,v}_proj.weight [*, 2H], o_proj,
// midlayer.mlp.{gate,up,down}_proj.weight, norm.weight, lm_head.weight [Vd, H], d2t [Vd] (int64;
// may be absent only when Vd = V), t2d (ignored, as vLLM does), embed_tokens.weight (optional).
// "layers.0." is read as "midlayer.". Any other tensor is refused by name.
#pragma once
#include <string>
#include <vector>

#include "nanovllm/layers/attention.h"
#include "nanovllm/layers/embed_head.h"
#include "nanovllm/layers/layernorm.h"
#include "nanovllm/layers/linear.h"
#include "nanovllm/models/eagle3_config.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

class Eagle3Head {
 public:
  Eagle3Head(const Eagle3Config& cfg, Backend& be);
  // Loads dir's safetensors (dir empty: deterministic random weights, d2t the identity on the
  // first Vd ids). target_embedding: the target's [V, H] table, used when the head has none.
  void load(const std::string& dir, const Tensor* target_embedding);

  // aux: [T, 3H] -> [T, H]
  Tensor fuse(const Tensor& aux) const;
  struct Output {
    Tensor normed, prenorm;  // [T, H] each
  };
  // ids, positions: [T] I32; hidden: [T, H] (not modified); kv: the head's one layer.
  Output forward(const Tensor& ids, const Tensor& positions, const Tensor& hidden, LayerKVCache& kv,
                 const AttentionMetadata& md) const;
  // normed [T, H], rows -> logits [B, Vd]
  Tensor compute_logits(const Tensor& normed, const std::vector<int32_t>& rows) const;

  const Eagle3Config& config() const { return cfg_; }
  const std::vector<int32_t>& draft_to_target() const { return d2t_; }  // [Vd] target ids

 private:
  void load_d2t(const SafetensorsCheckpoint* ckpt, const std::string& where);
  std::vector<WeightSpec> weight_specs(const std::string& layer_prefix, bool own_embedding);

  Eagle3Config cfg_;
  Backend& be_;
  Linear fc_;  // [H, 3H]
  RMSNorm input_layernorm_, hidden_norm_, post_attention_layernorm_, norm_;
  Linear qkv_proj_;      // [(Hq + 2 Hkv) * D, 2H]
  Linear o_proj_;        // [H, Hq * D]
  Linear gate_up_proj_;  // [2I, H]
  Linear down_proj_;     // [H, I]
  PagedAttention attn_;
  RopeParams rope_;
  VocabEmbedding embed_tokens_;  // own [V, H], or the target's table
  LMHead lm_head_;               // [Vd, H]
  std::vector<int32_t> d2t_;
};

}  // namespace nanovllm
