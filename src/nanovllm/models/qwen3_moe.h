// Qwen3-MoE for causal LM (Qwen3-30B-A3B's architecture), shaped like transformers'
// modeling_qwen3_moe.py: Qwen3's decoder (llama.h with q/k norm) where the sparse layers
// (ModelConfig::is_moe_layer) replace the dense MLP with Qwen3MoeSparseMoeBlock: a router
// (`mlp.gate`, a linear to E logits, softmax in F32, top-k, renormalized with norm_topk_prob) and E
// SwiGLU experts whose outputs are summed with the routing weights.
// Tensor parallelism: every rank holds all experts, each with its slice of moe_intermediate_size
// (gate/up rows, down columns, as the dense MLP's), and the router whole; the block's output is
// then this rank's partial sums, which the next norm all-reduces as after the dense MLP.
#pragma once
#include <memory>
#include <vector>

#include "nanovllm/models/llama.h"

namespace nanovllm {

struct Qwen3MoeSparseMoeBlock final : LayerMlp {
  Tensor gate;               // router [E, H]
  Tensor w13;                // experts' gate_up_proj [E, 2I, H]: expert e's gate rows, then its up rows (I per rank)
  Tensor w2;                 // experts' down_proj [E, H, I]
  Tensor w13_rows, w2_rows;  // the same storage as [E * 2I, H] and [E * H, I]: what the loader fills
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  Communicator* comm = nullptr;  // set: the output is F32 partial sums (see above)

  // residual += x; then the experts over post_norm(residual). x: [T, H] (spent) -> [T, H].
  Tensor forward(Backend& be, Tensor& x, Tensor& residual, const RMSNorm& post_norm) const override;
};

class Qwen3MoeForCausalLM final : public LlamaForCausalLM {
 public:
  Qwen3MoeForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm);
  std::vector<WeightSpec> weight_specs() override;
  // quantizable_linears (Llama's): the attention projections and the dense layers' MLPs.
  std::vector<const Tensor*> moe_expert_weights() override;

 private:
  std::vector<std::unique_ptr<Qwen3MoeSparseMoeBlock>> moe_;  // [num_hidden_layers]; null in dense layers
};

}  // namespace nanovllm
