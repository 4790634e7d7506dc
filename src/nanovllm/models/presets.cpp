// Built-in model configs (--model NAME with --load-format dummy): the real config.json values of
// the Hugging Face checkpoints named, so benchmarks run at real sizes without a download.
#include <functional>
#include <utility>

#include "nanovllm/config/config.h"
#include "nanovllm/models/hf_config.h"

namespace nanovllm {

namespace {

// Qwen/Qwen3-* and Qwen/Qwen2.5-*-Instruct (the latter: use_sliding_window false, full attention).
ModelConfig qwen(const char* architecture, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
                 int64_t kv_heads, int64_t head_dim, int64_t max_positions, bool tied) {
  ModelConfig c;
  c.architecture = architecture;
  c.vocab_size = vocab;
  c.hidden_size = hidden, c.intermediate_size = inter, c.num_hidden_layers = layers;
  c.num_attention_heads = heads, c.num_key_value_heads = kv_heads, c.head_dim = head_dim;
  c.max_position_embeddings = max_positions;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000;
  c.tie_word_embeddings = tied;
  c.eos_token_ids = {151645, 151643};
  c.bos_token_id = 151643;
  return c;
}

ModelConfig qwen3(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads, bool tied) {
  return qwen("Qwen3ForCausalLM", 151936, hidden, inter, layers, heads, kv_heads, 128, 40960, tied);
}

// Qwen/Qwen3-30B-A3B: 48 layers, every one sparse (decoder_sparse_step 1, mlp_only_layers []), 128
// experts of moe_intermediate_size 768, top-8 renormalized; intermediate_size 6144 is unused.
ModelConfig qwen3_30b_a3b() {
  ModelConfig c = qwen("Qwen3MoeForCausalLM", 151936, 2048, 6144, 48, 32, 4, 128, 40960, false);
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_intermediate_size = 768;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  return c;
}

ModelConfig qwen25(int64_t vocab, int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads,
                   bool tied) {
  return qwen("Qwen2ForCausalLM", vocab, hidden, inter, layers, heads, kv_heads, hidden / heads, 32768, tied);
}

ModelConfig llama3(int64_t hidden, int64_t inter, int64_t layers, int64_t head_dim, double factor, bool tied) {
  ModelConfig c;  // meta-llama/Llama-3.x-*-Instruct
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 128256;
  c.hidden_size = hidden, c.intermediate_size = inter, c.num_hidden_layers = layers;
  c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = head_dim;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000;
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = factor;
  c.rope_scaling.low_freq_factor = 1;
  c.rope_scaling.high_freq_factor = 4;
  c.rope_scaling.original_max_position_embeddings = 8192;
  c.tie_word_embeddings = tied;
  c.eos_token_ids = {128001, 128008, 128009};
  c.bos_token_id = 128000;
  return c;
}

ModelConfig mistral_7b() {
  ModelConfig c;  // mistralai/Mistral-7B-v0.1: a 4096-token sliding window in every layer
  c.architecture = "MistralForCausalLM";
  c.vocab_size = 32000;
  c.hidden_size = 4096, c.intermediate_size = 14336, c.num_hidden_layers = 32;
  c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = 128;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.sliding_window = 4096;
  c.tie_word_embeddings = false;
  c.eos_token_ids = {2};
  c.bos_token_id = 1;
  return c;
}

const std::pair<const char*, std::function<ModelConfig()>> kPresets[] = {
    {"qwen3-0.6b", [] { return qwen3(1024, 3072, 28, 16, 8, true); }},
    {"qwen3-1.7b", [] { return qwen3(2048, 6144, 28, 16, 8, true); }},
    {"qwen3-8b", [] { return qwen3(4096, 12288, 36, 32, 8, false); }},
    {"qwen3-30b-a3b", qwen3_30b_a3b},
    {"qwen2.5-0.5b", [] { return qwen25(151936, 896, 4864, 24, 14, 2, true); }},
    {"qwen2.5-7b", [] { return qwen25(152064, 3584, 18944, 28, 28, 4, false); }},
    {"llama-3.2-1b", [] { return llama3(2048, 8192, 16, 64, 32, true); }},
    {"llama-3.1-8b", [] { return llama3(4096, 14336, 32, 128, 8, false); }},
    {"mistral-7b", mistral_7b},
};

}  // namespace

std::optional<ModelConfig> preset_model_config(const std::string& name) {
  for (const auto& [n, make] : kPresets)
    if (name == n) return make();
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [n, make] : kPresets) names.emplace_back(n);
  return names;
}

}  // namespace nanovllm
