#include "nanovllm/models/llama.h"

#include <cmath>

#include "nanovllm/models/norm_fold.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

Tensor LlamaAttention::attend(Backend& be, const Tensor& positions, const RopeParams& rope, Tensor& qkv,
                              LayerKVCache& kv, const AttentionMetadata& md, const ReadAhead& then, bool roped) {
  // (q/k RMSNorm +) RoPE in place, and this step's k/v into the cache pages at md.slot_mapping.
  if (!roped)
    be.qk_norm_rope_store(qkv, q_norm.weight, k_norm.weight, positions, kv.k, kv.v, attn.num_heads, attn.num_kv_heads,
                          attn.head_dim, q_norm.eps, rope, md, kv.scales);
  return attn.forward(be, qkv, kv, md, then);
}

namespace {
// src's `rows` [rows.size(), src.size(1)].
Tensor take_rows(Backend& be, const Tensor& src, const std::vector<int32_t>& rows) {
  Tensor out = be.empty({int64_t(rows.size()), src.size(1)}, src.dtype());
  if (!rows.empty()) be.gather_rows(src, rows, out);
  return out;
}
}  // namespace

Deferred LlamaMLP::forward(Backend& be, const Deferred& x, Tensor& residual, const RMSNorm& post_norm) const {
  Tensor act = post_norm.forward_residual_linear(be, x, residual, gate_up_proj, /*silu_mul=*/true);  // [T, I]
  return {&down_proj, act};  // [T, H], run by the next norm
}

void LlamaDecoderLayer::forward(Backend& be, const Tensor& positions, const RopeParams& rope, Deferred& x,
                                Tensor& residual, LayerKVCache& kv, const AttentionMetadata& md,
                                const LayerObserver& obs, int64_t index, const LlamaDecoderLayer* next,
                                const std::vector<int32_t>* rows) {
  Tensor qkv;  // input_layernorm, then qkv_proj: [T, (Hq + 2 Hkv) * D]
  bool roped = false;
  if (!residual.defined()) {
    residual = x.run(be);
    qkv = self_attn.qkv_proj.forward(be, input_layernorm.forward(be, residual));
  } else if (!self_attn.qkv_proj.bias.defined()) {  // and the q/k norm + RoPE + KV store in the same op
    qkv = input_layernorm.forward_residual_linear_rope(be, x, residual, self_attn.qkv_proj,
                                                       self_attn.rope_store(positions, rope, kv, md));
    roped = true;
    if (obs) obs(index - 1, 1, residual);
  } else {
    qkv = input_layernorm.forward_residual_linear(be, x, residual, self_attn.qkv_proj);
    self_attn.qkv_proj.add_bias(be, qkv);  // (the fused norm + GEMM leaves the bias out)
    if (obs) obs(index - 1, 1, residual);
  }
  // After the attention come o_proj, the MLP and the next layer's qkv_proj: their weights may be
  // loaded while the attention finishes (CUDA: into L2, by the decode attention's merge kernel).
  ReadAhead then;
  then.tensors[0] = &self_attn.o_proj.weight;
  if (!other_mlp) {
    then.tensors[1] = &mlp.gate_up_proj.weight;
    then.tensors[2] = &mlp.down_proj.weight;
  }
  if (next) then.tensors[3] = &next->self_attn.qkv_proj.weight;
  Tensor o = self_attn.attend(be, positions, rope, qkv, kv, md, then, roped);  // [T, Hq * D]
  if (rows) {  // only these rows go on: o_proj and the MLP on them alone
    residual = take_rows(be, residual, *rows);
    o = take_rows(be, o, *rows);
    if (rows->empty()) {
      x = {nullptr, be.empty({0, residual.size(1)}, be.act_dtype())};
      return;
    }
  }
  // o_proj (run by the post-attention norm, which adds it to the residual), then the MLP, whose
  // down_proj the next layer's input norm (or the final norm) runs.
  const Deferred attn_out{&self_attn.o_proj, o};
  if (other_mlp) {
    Tensor y = attn_out.run(be);
    x = {nullptr, other_mlp->forward(be, y, residual, post_attention_layernorm)};  // the norm runs inside
  } else {
    x = mlp.forward(be, attn_out, residual, post_attention_layernorm);
  }
  if (obs) obs(index, 0, residual);
}

LlamaForCausalLM::LlamaForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm, LlamaFeatures features)
    : cfg_(cfg), features_(features), be_(be) {
  if (comm) {
    rank_ = comm->rank();
    world_ = comm->world_size();
  }
  validate_tensor_parallel(cfg, world_);
  if (world_ == 1) comm = nullptr;  // one rank: no collectives at all
  comm_ = comm;
  const int64_t N = world_, H = cfg.hidden_size, D = cfg.head_dim, I = cfg.intermediate_size / N;
  const int64_t Hq = cfg.num_attention_heads / N, Hkv = cfg.num_key_value_heads / N, V = cfg.vocab_size / N;
  rotary_emb_ = rotary_embedding(cfg);
  embed_tokens_.create(be, V, H);
  embed_tokens_.vocab_start = rank_ * V;
  embed_tokens_.comm = comm;
  lm_head_.comm = comm;
  layers_.resize(size_t(cfg.num_hidden_layers));
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    l.self_attn.qkv_proj.create(be, (Hq + 2 * Hkv) * D, H, features.qkv_bias);
    l.self_attn.o_proj.create(be, H, Hq * D);
    l.self_attn.o_proj.comm = comm;
    l.self_attn.q_norm.eps = l.self_attn.k_norm.eps = float(cfg.rms_norm_eps);
    if (features.qk_norm) {
      l.self_attn.q_norm.create(be, D, cfg.rms_norm_eps);
      l.self_attn.k_norm.create(be, D, cfg.rms_norm_eps);
    }
    l.self_attn.attn = {Hq, Hkv, D, float(1.0 / std::sqrt(double(D))), cfg.layer_window(int64_t(i))};
    if (!cfg.is_moe_layer(int64_t(i))) {
      l.mlp.gate_up_proj.create(be, 2 * I, H);
      l.mlp.down_proj.create(be, H, I);
      l.mlp.down_proj.comm = comm;
    }
    l.input_layernorm.create(be, H, cfg.rms_norm_eps);
    l.input_layernorm.comm = comm;  // its residual form adds down_proj's partial sums
    l.post_attention_layernorm.create(be, H, cfg.rms_norm_eps);
    l.post_attention_layernorm.comm = comm;  // ... o_proj's
  }
  norm_.create(be, H, cfg.rms_norm_eps);
  norm_.comm = comm;
  if (!cfg.tie_word_embeddings) lm_head_weight_ = be.empty({V, H}, be.weight_dtype());
}

// Checkpoint tensors are full-size; each spec takes this rank's slice. Column-parallel (split
// rows): q/k/v (and their biases) by heads, gate/up by I, embedding and LM head by vocabulary;
// row-parallel (split columns): o_proj, down_proj. The packed destinations take the local slices
// back to back.
std::vector<WeightSpec> LlamaForCausalLM::weight_specs() {
  const int64_t H = cfg_.hidden_size, D = cfg_.head_dim, I = cfg_.intermediate_size, N = world_;
  const int64_t q = cfg_.q_size(), kv = cfg_.kv_size();
  auto rows = [&](std::string name, Shape shape, Tensor* dst, int64_t offset = 0) {
    WeightSpec w{std::move(name), std::move(shape), dst, offset};
    w.shard_dim = N > 1 ? 0 : -1;
    w.shard_rank = rank_;
    w.num_shards = N;
    return w;
  };
  auto cols = [&](std::string name, Shape shape, Tensor* dst) {
    WeightSpec w = rows(std::move(name), std::move(shape), dst);
    w.shard_dim = N > 1 ? 1 : -1;
    return w;
  };
  std::vector<WeightSpec> s;
  s.push_back(rows("model.embed_tokens.weight", {cfg_.vocab_size, H}, &embed_tokens_.weight));
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* part : {"weight", "bias"}) {
      const bool weight = part[0] == 'w';
      if (!weight && !features_.qkv_bias) break;
      Tensor* dst = weight ? &l.self_attn.qkv_proj.weight : &l.self_attn.qkv_proj.bias;
      auto shape = [&](int64_t n) { return weight ? Shape{n, H} : Shape{n}; };
      s.push_back(rows(p + "self_attn.q_proj." + part, shape(q), dst, 0));
      s.push_back(rows(p + "self_attn.k_proj." + part, shape(kv), dst, q / N));
      s.push_back(rows(p + "self_attn.v_proj." + part, shape(kv), dst, (q + kv) / N));
    }
    s.push_back(cols(p + "self_attn.o_proj.weight", {H, q}, &l.self_attn.o_proj.weight));
    if (features_.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {D}, &l.self_attn.q_norm.weight});
      s.push_back({p + "self_attn.k_norm.weight", {D}, &l.self_attn.k_norm.weight});
    }
    if (!cfg_.is_moe_layer(int64_t(i))) {
      s.push_back(rows(p + "mlp.gate_proj.weight", {I, H}, &l.mlp.gate_up_proj.weight, 0));
      s.push_back(rows(p + "mlp.up_proj.weight", {I, H}, &l.mlp.gate_up_proj.weight, I / N));
      s.push_back(cols(p + "mlp.down_proj.weight", {H, I}, &l.mlp.down_proj.weight));
    }
    s.push_back({p + "input_layernorm.weight", {H}, &l.input_layernorm.weight});
    s.push_back({p + "post_attention_layernorm.weight", {H}, &l.post_attention_layernorm.weight});
  }
  s.push_back({"model.norm.weight", {H}, &norm_.weight});
  if (!cfg_.tie_word_embeddings) s.push_back(rows("lm_head.weight", {cfg_.vocab_size, H}, &lm_head_weight_));
  return s;
}

void LlamaForCausalLM::finalize_weights() {
  lm_head_.weight = cfg_.tie_word_embeddings ? embed_tokens_.weight : lm_head_weight_;
}

// The input norm into qkv_proj, and in dense layers the post-attention norm into gate_up_proj (a
// sparse MLP's router and experts read the normed stream: not folded). One rank only: under tensor
// parallelism the norms run with the all-reduce (layernorm.h), which the fold would not spare.
int64_t LlamaForCausalLM::fold_rms_norms() {
  if (world_ > 1) return 0;
  int64_t folded = 0;
  for (auto& l : layers_) {
    folded += fold_rms_norm(be_, l.input_layernorm, l.self_attn.qkv_proj) ? 1 : 0;
    if (!l.other_mlp) folded += fold_rms_norm(be_, l.post_attention_layernorm, l.mlp.gate_up_proj) ? 1 : 0;
  }
  return folded;
}

std::vector<Linear*> LlamaForCausalLM::quantizable_linears() {
  std::vector<Linear*> out;
  for (auto& l : layers_) {
    out.push_back(&l.self_attn.qkv_proj);
    out.push_back(&l.self_attn.o_proj);
    if (l.other_mlp) continue;
    out.push_back(&l.mlp.gate_up_proj);
    out.push_back(&l.mlp.down_proj);
  }
  return out;
}

Tensor LlamaForCausalLM::forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv,
                                 const AttentionMetadata& md, const std::vector<int32_t>* rows) {
  if (kv.size() != layers_.size())
    throw Error(cfg_.architecture + ": KV cache has " + std::to_string(kv.size()) + " layers, model has " +
                std::to_string(layers_.size()));
  Deferred x{nullptr, embed_tokens_.forward(be_, ids)};  // [T, H]
  Tensor residual;
  // EAGLE-3: the stream entering layer id (id >= 1: the output of layer id - 1, stage 1) copied out.
  LayerObserver aux_observer;
  const bool capture = !aux_layers_.empty() && ids.size(0) <= aux_max_tokens_;  // larger: none (a warm-up)
  if (capture) {
    if (aux_layers_[0] == 0) copy_aux(0, x.input);
    aux_observer = [this](int64_t layer, int stage, const Tensor& stream) {
      if (layer_observer) layer_observer(layer, stage, stream);
      if (stage != 1) return;
      for (size_t j = 0; j < aux_layers_.size(); ++j)
        if (aux_layers_[j] == layer + 1) copy_aux(j, stream);
    };
  }
  const LayerObserver& obs = capture ? aux_observer : layer_observer;
  // The last layer on `rows` alone, unless something reads every row's stream (an observer; EAGLE's
  // copies come before the last layer, so they are not one) or the ranks would have to agree on
  // the rows (tensor parallelism: o_proj's all-reduce): then every row, and the rows taken at the end.
  const bool all_rows = rows && int64_t(rows->size()) == ids.size(0);  // (ascending: 0 .. T-1)
  const std::vector<int32_t>* last_rows = rows && !all_rows && !layer_observer && !comm_ ? rows : nullptr;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool last = i + 1 == layers_.size();
    layers_[i].forward(be_, positions, rotary_emb_, x, residual, kv[i], md, obs, int64_t(i),
                       last ? nullptr : &layers_[i + 1], last ? last_rows : nullptr);
  }
  Tensor h = x.input.size(0) > 0 ? norm_.forward_residual(be_, x, residual) : x.run(be_);
  if (layer_observer) layer_observer(int64_t(layers_.size()) - 1, 1, residual);
  return rows && !last_rows && !all_rows ? take_rows(be_, h, *rows) : h;
}

void LlamaForCausalLM::capture_aux_hidden(const std::vector<int64_t>& layers, int64_t max_tokens) {
  for (size_t j = 0; j < layers.size(); ++j)
    if (layers[j] < 0 || layers[j] >= int64_t(layers_.size()) || (j > 0 && layers[j] <= layers[j - 1]))
      throw Error(cfg_.architecture + ": EAGLE-3 hidden-state layers must be ascending ids below " +
                  std::to_string(layers_.size()));
  aux_layers_ = layers;
  aux_max_tokens_ = max_tokens;
  aux_hidden_ = Tensor();
  if (!layers.empty())
    aux_hidden_ = be_.empty({int64_t(layers.size()) * max_tokens, cfg_.hidden_size}, be_.act_dtype());
}

void LlamaForCausalLM::copy_aux(size_t j, const Tensor& stream) {
  const int64_t T = stream.size(0), base = int64_t(j) * aux_max_tokens_;
  Tensor dst = aux_hidden_.rows(base, base + T);
  be_.cast(stream, dst);
}

Tensor LlamaForCausalLM::compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) {
  return lm_head_.forward(be_, hidden, last_rows);
}

}  // namespace nanovllm
