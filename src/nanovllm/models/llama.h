// Llama for causal LM, shaped like the Hugging Face model so the two read side by side:
// LlamaAttention -> LlamaMLP -> LlamaDecoderLayer -> LlamaModel -> LlamaForCausalLM (LlamaModel's
// embedding, layers and final norm are folded into LlamaForCausalLM).
// Mixture-of-experts layers (ModelConfig::is_moe_layer) get no dense MLP here: the derived class
// (qwen3_moe.h) sets their LlamaDecoderLayer::other_mlp and loads its weights.
// The dense families that transformers derives from Llama (their modular_*.py files) are this
// network with a feature more, chosen by their classes (qwen2.h, qwen3.h, mistral.h): q/k/v
// biases (Qwen2), an RMSNorm over each q and k head (Qwen3); and, wherever the config asks for it
// (ModelConfig::layer_window), sliding-window attention (Mistral; Qwen2/3 with use_sliding_window).
#pragma once
#include <vector>

#include "nanovllm/layers/attention.h"
#include "nanovllm/layers/embed_head.h"
#include "nanovllm/layers/layernorm.h"
#include "nanovllm/layers/linear.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/causal_lm.h"

namespace nanovllm {

struct LlamaFeatures {
  bool qkv_bias = false;  // q_proj, k_proj, v_proj have biases (Qwen2)
  bool qk_norm = false;   // q_norm, k_norm: RMSNorm of each q and k head before RoPE (Qwen3)
};

// Shapes per rank: with N tensor-parallel ranks Hq, Hkv and I below are the full model's / N
// (each rank owns whole heads), V is V/N; H and D are not split.
struct LlamaAttention {
  Linear qkv_proj;           // [(Hq + 2 Hkv) * D, H] packed from q_proj, k_proj, v_proj (column-parallel),
                             // with qkv_bias a bias [(Hq + 2 Hkv) * D] packed the same way
  RowParallelLinear o_proj;  // [H, Hq * D]
  RMSNorm q_norm, k_norm;    // [D], applied per head; with qk_norm only (else undefined weights)
  PagedAttention attn;       // attn.sliding_window: this layer's window (0: full attention)

  // qkv: [T, (Hq + 2 Hkv) * D], the output of qkv_proj (the decoder layer runs it, fused with its
  // input norm) -> the attention's output [T, Hq * D], before o_proj (which the decoder layer leaves
  // to the norm after it: layernorm.h's Deferred; under TP its F32 partial sums are all-reduced there).
  // rope: the model's rotary embedding (Hugging Face passes its cos/sin down as position_embeddings).
  // roped: qkv already had its q/k norm + RoPE and KV store (the decoder layer fused them with
  // qkv_proj: rope_store).
  Tensor attend(Backend& be, const Tensor& positions, const RopeParams& rope, Tensor& qkv, LayerKVCache& kv,
                const AttentionMetadata& md, const ReadAhead& then = {}, bool roped = false);
  // The arguments of this layer's q/k norm + RoPE + KV store (Backend::qk_norm_rope_store).
  Backend::QkNormRopeStore rope_store(const Tensor& positions, const RopeParams& rope, LayerKVCache& kv,
                                      const AttentionMetadata& md) const {
    return {q_norm.weight,     k_norm.weight, positions,  kv.k, kv.v, attn.num_heads,
            attn.num_kv_heads, attn.head_dim, q_norm.eps, rope, md,   kv.scales};
  }
};

struct LlamaMLP {
  Linear gate_up_proj;          // [2I, H] packed from gate_proj, up_proj (column-parallel)
  RowParallelLinear down_proj;  // [H, I]
  // residual += x; then down(silu(gate) * up) of post_norm(residual): the norm is fused with
  // gate_up_proj (and with x's projection where the backend folds it: layernorm.h). x: [T, H]
  // (spent) -> [T, H] (under TP: partial sums, as LlamaAttention's), down_proj left to the next norm.
  Deferred forward(Backend& be, const Deferred& x, Tensor& residual, const RMSNorm& post_norm) const;
};

// A layer's MLP in place of LlamaMLP (Qwen3-MoE's sparse block, models/qwen3_moe.h): residual += x;
// then the MLP of post_norm(residual), computed.
struct LayerMlp {
  virtual ~LayerMlp() = default;
  virtual Tensor forward(Backend& be, Tensor& x, Tensor& residual, const RMSNorm& post_norm) const = 0;
};

struct LlamaDecoderLayer {
  LlamaAttention self_attn;
  LlamaMLP mlp;                         // undefined weights where other_mlp is set
  const LayerMlp* other_mlp = nullptr;  // set: this layer's MLP instead of `mlp` (owned by the model)
  RMSNorm input_layernorm, post_attention_layernorm;
  // x: [T, H] in, out, deferred (layernorm.h: the previous layer's down_proj, this layer's, run by
  // the norm after them); residual: [T, H] running sum (undefined before the first layer).
  // obs (may be empty): the stream after this layer's attention add (stage 0, as `index`) and, once
  // this layer's input norm has added it, the previous layer's output (stage 1, as index - 1).
  // next: the layer after this one (nullptr for the last), whose qkv_proj is read ahead.
  // rows (the last layer, CausalLM::forward): after the attention only these rows go on, so x and
  // residual leave as [rows.size(), H].
  void forward(Backend& be, const Tensor& positions, const RopeParams& rope, Deferred& x, Tensor& residual,
               LayerKVCache& kv, const AttentionMetadata& md, const LayerObserver& obs, int64_t index,
               const LlamaDecoderLayer* next = nullptr, const std::vector<int32_t>* rows = nullptr);
};

class LlamaForCausalLM : public CausalLM {
 public:
  LlamaForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm, LlamaFeatures features = {});
  std::vector<WeightSpec> weight_specs() override;
  void finalize_weights() override;
  std::vector<Linear*> quantizable_linears() override;
  int64_t fold_rms_norms() override;
  LMHead* lm_head() override { return &lm_head_; }
  Tensor forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv, const AttentionMetadata& md,
                 const std::vector<int32_t>* rows = nullptr) override;
  Tensor compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) override;
  const Tensor* embedding_table() const override { return world_ == 1 ? &embed_tokens_.weight : nullptr; }
  void capture_aux_hidden(const std::vector<int64_t>& layers, int64_t max_tokens) override;

 protected:
  ModelConfig cfg_;
  LlamaFeatures features_;
  Backend& be_;
  int rank_ = 0, world_ = 1;      // tensor parallelism
  Communicator* comm_ = nullptr;  // its collectives; nullptr for one rank
  VocabEmbedding embed_tokens_;
  RopeParams rotary_emb_;  // one for all layers, as LlamaModel.rotary_emb
  std::vector<LlamaDecoderLayer> layers_;
  RMSNorm norm_;
  LMHead lm_head_;
  Tensor lm_head_weight_;  // own weight when untied

 private:
  // Copies stream [T, H] into plane j of aux_hidden_ (capture_aux_hidden).
  void copy_aux(size_t j, const Tensor& stream);
};

}  // namespace nanovllm
