// The context-length rules (the model's length, --max-model-len) and EngineConfig's validation;
// config.json itself is read in models/hf_config.cpp, the presets are in models/presets.cpp.
#include "nanovllm/config/config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "nanovllm/config/settings.h"
#include "nanovllm/utils/checked_math.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {
std::string shown(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
}  // namespace

int64_t ModelConfig::derived_max_model_len() const {
  if (!rope_scaling.is_yarn()) return max_position_embeddings;
  // vLLM: derived = original_max_position_embeddings * factor for YaRN (int() of the product);
  // transformers too ignores max_position_embeddings here (it only warns when it differs from
  // factor * original). Positions are int32 on the device.
  const double len = std::floor(double(rope_scaling.original_max_position_embeddings) * rope_scaling.factor);
  return int64_t(std::clamp(len, 1.0, double(INT32_MAX)));
}

std::optional<int64_t> ModelConfig::checked_num_parameters() const {
  const int64_t H = hidden_size, D = head_dim, I = intermediate_size, L = num_hidden_layers;
  std::optional<int64_t> n = 0;
  auto add = [&n](std::optional<int64_t> term) { n = n && term ? checked_add(*n, *term) : std::nullopt; };
  auto mul = [](std::initializer_list<int64_t> xs) {
    std::optional<int64_t> p = 1;
    for (int64_t x : xs) p = p ? checked_mul(*p, x) : std::nullopt;
    return p;
  };
  std::optional<int64_t> layer = 0;
  auto add_layer = [&layer](std::optional<int64_t> term) {
    layer = layer && term ? checked_add(*layer, *term) : std::nullopt;
  };
  add_layer(mul({num_attention_heads + 2 * num_key_value_heads, D, H}));  // q, k, v
  if (architecture == "Qwen2ForCausalLM")
    add_layer(mul({num_attention_heads + 2 * num_key_value_heads, D}));  // their biases
  add_layer(mul({H, num_attention_heads, D}));                           // o
  if (architecture == "Qwen3ForCausalLM" || architecture == "Qwen3MoeForCausalLM")
    add_layer(mul({2, D}));  // q_norm, k_norm
  add_layer(mul({2, H}));    // the two layer norms
  add(layer ? mul({L, *layer}) : std::nullopt);
  for (int64_t i = 0; i < L; ++i)  // MLPs: dense gate, up, down; or the router and each expert's
    add(is_moe_layer(i) ? mul({num_experts, 3 * moe_intermediate_size + 1, H}) : mul({3, I, H}));
  add(mul({tie_word_embeddings ? 1 : 2, vocab_size, H}));  // embedding (+ LM head)
  add(H);                                                  // final norm
  return n;
}

int64_t settle_max_model_len(const EngineConfig& cfg, const ModelConfig& mcfg, std::optional<int64_t> kv_blocks,
                             std::string* note) {
  const int64_t model_len = mcfg.derived_max_model_len();
  if (!cfg.max_model_len_is_auto() && cfg.max_model_len > model_len)
    throw UserError("--max-model-len " + std::to_string(cfg.max_model_len) + " is larger than the model's " +
                    std::to_string(model_len) + " (" +
                    (mcfg.rope_scaling.is_yarn()
                         ? "YaRN factor " + shown(mcfg.rope_scaling.factor) + " * original_max_position_embeddings " +
                               std::to_string(mcfg.rope_scaling.original_max_position_embeddings)
                         : "max_position_embeddings in config.json") +
                    "); positions past it give wrong outputs. Leave --max-model-len unset for the model's length");
  const int64_t len = cfg.max_model_len_is_auto() ? model_len : cfg.max_model_len;
  // One sequence of max_model_len tokens must fit the cache, else a request the server accepts
  // could never be scheduled. Lowering an unset length is what a user who set none wants (vLLM
  // would refuse it too).
  const int64_t bs = cfg.block_size;
  if (!kv_blocks || *kv_blocks * bs >= len) return len;
  const int64_t holds = *kv_blocks * bs;
  const std::string cache = std::to_string(*kv_blocks) + " blocks of " + std::to_string(bs) + " tokens";
  if (!cfg.max_model_len_is_auto())
    throw UserError("max_model_len " + std::to_string(len) + " is larger than the KV cache can hold (" + cache + " = " +
                    std::to_string(holds) + " tokens); lower --max-model-len or enlarge the cache " +
                    "(--kv-cache-memory, --gpu-memory-utilization)");
  if (note)
    *note = "max_model_len lowered from " + std::to_string(len) + " to " + std::to_string(holds) +
            ": the KV cache holds " + cache;
  return holds;
}

void EngineConfig::validate() const {
  for (const Setting& s : engine_settings())
    if (s.check) s.check(s, *this);
  // Every running sequence decodes one token per step within the budget (as vLLM requires).
  if (max_num_batched_tokens < max_num_seqs)
    throw UserError("--max-num-batched-tokens (" + std::to_string(max_num_batched_tokens) +
                    ") must be at least --max-num-seqs (" + std::to_string(max_num_seqs) +
                    "): each step decodes one token of every running sequence; raise it or lower --max-num-seqs");
  if (max_num_batched_tokens < block_size)
    throw UserError("--max-num-batched-tokens (" + std::to_string(max_num_batched_tokens) +
                    ") must be at least one block (--block-size " + std::to_string(block_size) + ")");
  if (max_long_partial_prefills > max_num_partial_prefills)
    throw UserError("--max-long-partial-prefills (" + std::to_string(max_long_partial_prefills) +
                    ") must be at most --max-num-partial-prefills (" + std::to_string(max_num_partial_prefills) + ")");
  if (tensor_parallel_size % nnodes != 0)
    throw UserError("--nnodes " + std::to_string(nnodes) + " does not divide --tensor-parallel-size " +
                    std::to_string(tensor_parallel_size) + " (every node runs the same number of ranks)");
  if (node_rank < 0 || node_rank >= nnodes)
    throw UserError("--node-rank must be in [0, " + std::to_string(nnodes) + ") (got " + std::to_string(node_rank) +
                    ")");
  if (tp_rank < 0 || tp_rank >= tensor_parallel_size)
    throw UserError("--rank must be in [0, " + std::to_string(tensor_parallel_size) + ") (got " +
                    std::to_string(tp_rank) + ")");
}

void settle_target_itl(EngineConfig& cfg, bool serving, bool on_gpu) {
  if (cfg.target_itl_ms < 0) cfg.target_itl_ms = serving && on_gpu ? kServeTargetItlMs : 0;
}

int64_t effective_long_prefill_threshold(const EngineConfig& cfg) {
  if (cfg.long_prefill_token_threshold > 0) return cfg.long_prefill_token_threshold;
  return cfg.max_num_partial_prefills > 1 ? int64_t(double(cfg.max_model_len) * 0.04) : 0;
}

}  // namespace nanovllm
