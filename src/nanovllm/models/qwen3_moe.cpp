#include "nanovllm/models/qwen3_moe.h"

#include <string>

namespace nanovllm {

Tensor Qwen3MoeSparseMoeBlock::forward(Backend& be, Tensor& x, Tensor& residual, const RMSNorm& post_norm) const {
  post_norm.forward_residual(be, x, residual);  // x = post_attention_layernorm(residual)
  const int64_t T = x.size(0), E = gate.size(0);
  Tensor router_logits = be.empty({T, E}, DType::F32);
  be.linear(x, gate, router_logits);
  Tensor routing_weights = be.empty({T, top_k}, DType::F32), selected_experts = be.empty({T, top_k}, DType::I32);
  be.moe_topk(router_logits, top_k, norm_topk_prob, routing_weights, selected_experts);
  Tensor out = be.empty(x.shape(), comm ? DType::F32 : be.act_dtype());
  be.moe_experts(x, w13, w2, routing_weights, selected_experts, out);
  return out;
}

Qwen3MoeForCausalLM::Qwen3MoeForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm)
    : LlamaForCausalLM(cfg, be, comm, {.qkv_bias = false, .qk_norm = true}) {
  const int64_t E = cfg.num_experts, H = cfg.hidden_size, I = cfg.moe_intermediate_size / world_;
  moe_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!cfg.is_moe_layer(int64_t(i))) continue;
    auto m = std::make_unique<Qwen3MoeSparseMoeBlock>();
    m->gate = be.empty({E, H}, be.weight_dtype());
    m->w13 = be.empty({E, 2 * I, H}, be.weight_dtype());
    m->w2 = be.empty({E, H, I}, be.weight_dtype());
    m->w13_rows = m->w13.view({E * 2 * I, H});
    m->w2_rows = m->w2.view({E * H, I});
    m->top_k = cfg.num_experts_per_tok;
    m->norm_topk_prob = cfg.norm_topk_prob;
    m->comm = comm_;
    layers_[i].other_mlp = m.get();
    moe_[i] = std::move(m);
  }
}

// The dense parts as Llama/Qwen3 load them, then per sparse layer the router (whole on every rank)
// and each expert's tensors of the published checkpoint: gate_proj / up_proj [I, H] into rows
// e * 2I + [0, I) / [I, 2I) of w13 viewed as [E * 2I, H] (this rank's row slice under TP), down_proj
// [H, I] into rows e * H + [0, H) of w2 viewed as [E * H, I] (this rank's column slice).
std::vector<WeightSpec> Qwen3MoeForCausalLM::weight_specs() {
  std::vector<WeightSpec> s = LlamaForCausalLM::weight_specs();
  const int64_t H = cfg_.hidden_size, I = cfg_.moe_intermediate_size, N = world_, Il = I / N;
  auto sharded = [&](std::string name, Shape shape, Tensor* dst, int64_t row_offset, int dim) {
    WeightSpec w{std::move(name), std::move(shape), dst, row_offset};
    w.shard_dim = N > 1 ? dim : -1;
    w.shard_rank = rank_;
    w.num_shards = N;
    return w;
  };
  for (size_t i = 0; i < moe_.size(); ++i) {
    if (!moe_[i]) continue;
    auto& m = *moe_[i];
    const std::string p = "model.layers." + std::to_string(i) + ".mlp.";
    s.push_back({p + "gate.weight", {cfg_.num_experts, H}, &m.gate});
    for (int64_t e = 0; e < cfg_.num_experts; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      s.push_back(sharded(q + "gate_proj.weight", {I, H}, &m.w13_rows, e * 2 * Il, 0));
      s.push_back(sharded(q + "up_proj.weight", {I, H}, &m.w13_rows, e * 2 * Il + Il, 0));
      s.push_back(sharded(q + "down_proj.weight", {H, I}, &m.w2_rows, e * H, 1));
    }
  }
  return s;
}

std::vector<const Tensor*> Qwen3MoeForCausalLM::moe_expert_weights() {
  std::vector<const Tensor*> out;
  for (const auto& m : moe_)
    if (m) out.insert(out.end(), {&m->w13_rows, &m->w2_rows});
  return out;
}

}  // namespace nanovllm
