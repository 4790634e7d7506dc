// Qwen3 for causal LM, shaped like the Hugging Face model so the two read side by side:
// Qwen3Attention -> Qwen3MLP -> Qwen3DecoderLayer -> Qwen3Model -> Qwen3ForCausalLM.
#pragma once
#include <vector>

#include "nanovllm/layers/attention.h"
#include "nanovllm/layers/embed_head.h"
#include "nanovllm/layers/layernorm.h"
#include "nanovllm/layers/linear.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/causal_lm.h"

namespace nanovllm {

// Shapes per rank: with N tensor-parallel ranks Hq, Hkv and I below are the full model's / N
// (each rank owns whole heads), V is V/N; H and D are not split.
struct Qwen3Attention {
  Linear qkv_proj;           // [(Hq + 2 Hkv) * D, H] packed from q_proj, k_proj, v_proj (column-parallel)
  RowParallelLinear o_proj;  // [H, Hq * D]
  RMSNorm q_norm, k_norm;    // [D], applied per head
  PagedAttention attn;

  // qkv: [T, (Hq + 2 Hkv) * D], the output of qkv_proj (the decoder layer runs it, fused with its
  // input norm) -> [T, H] (under TP: F32 partial sums, which the next norm all-reduces). rope: the
  // model's rotary embedding (Hugging Face passes its cos/sin down as position_embeddings).
  Tensor forward(Backend& be, const Tensor& positions, const RopeParams& rope, Tensor& qkv, LayerKVCache& kv,
                 const AttentionMetadata& md);
};

struct Qwen3MLP {
  Linear gate_up_proj;          // [2I, H] packed from gate_proj, up_proj (column-parallel)
  RowParallelLinear down_proj;  // [H, I]
  // residual += x; then down(silu(gate) * up) of post_norm(residual): the norm is fused with
  // gate_up_proj. x: [T, H] (spent) -> [T, H] (under TP: partial sums, as Qwen3Attention's).
  Tensor forward(Backend& be, Tensor& x, Tensor& residual, const RMSNorm& post_norm) const;
};

struct Qwen3DecoderLayer {
  Qwen3Attention self_attn;
  Qwen3MLP mlp;
  RMSNorm input_layernorm, post_attention_layernorm;
  // x: [T, H] in, out; residual: [T, H] running sum (undefined before the first layer).
  // obs (may be empty): the stream after this layer's attention add (stage 0, as `index`) and, once
  // this layer's input norm has added it, the previous layer's output (stage 1, as index - 1).
  void forward(Backend& be, const Tensor& positions, const RopeParams& rope, Tensor& x, Tensor& residual,
               LayerKVCache& kv, const AttentionMetadata& md, const LayerObserver& obs, int64_t index);
};

class Qwen3ForCausalLM final : public CausalLM {
 public:
  Qwen3ForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm);
  std::vector<WeightSpec> weight_specs() override;
  void finalize_weights() override;
  Tensor forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv,
                 const AttentionMetadata& md) override;
  Tensor compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) override;

 private:
  ModelConfig cfg_;
  Backend& be_;
  int rank_ = 0, world_ = 1;  // tensor parallelism
  VocabEmbedding embed_tokens_;
  RopeParams rotary_emb_;  // one for all layers, as Qwen3Model.rotary_emb
  std::vector<Qwen3DecoderLayer> layers_;
  RMSNorm norm_;
  LMHead lm_head_;
  Tensor lm_head_weight_;  // own weight when untied
};

}  // namespace nanovllm
