// The context-length rules (the model's length, --max-model-len) and EngineConfig's validation;
// config.json itself is read in config_json.cpp, the presets are in models/presets.cpp.
#include "nanovllm/config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

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

int64_t initial_max_model_len(const EngineConfig& cfg, const ModelConfig& mcfg) {
  const int64_t model_len = mcfg.derived_max_model_len();
  if (cfg.max_model_len_is_auto()) return model_len;
  if (cfg.max_model_len > model_len)
    throw UserError("--max-model-len " + std::to_string(cfg.max_model_len) + " is larger than the model's " +
                    std::to_string(model_len) + " (" +
                    (mcfg.rope_scaling.is_yarn()
                         ? "YaRN factor " + shown(mcfg.rope_scaling.factor) + " * original_max_position_embeddings " +
                               std::to_string(mcfg.rope_scaling.original_max_position_embeddings)
                         : "max_position_embeddings in config.json") +
                    "); positions past it give wrong outputs. Leave --max-model-len unset for the model's length");
  return cfg.max_model_len;
}

void EngineConfig::validate() const {
  auto pos = [](const char* name, int64_t v) {
    if (v <= 0) throw UserError(std::string("--") + name + " must be positive (got " + std::to_string(v) + ")");
  };
  pos("max-num-seqs", max_num_seqs);
  pos("max-num-batched-tokens", max_num_batched_tokens);
  // Every running sequence decodes one token per step within the budget (as vLLM requires).
  if (max_num_batched_tokens < max_num_seqs)
    throw UserError("--max-num-batched-tokens (" + std::to_string(max_num_batched_tokens) +
                    ") must be at least --max-num-seqs (" + std::to_string(max_num_seqs) +
                    "): each step decodes one token of every running sequence; raise it or lower --max-num-seqs");
  if (max_model_len < 0)
    throw UserError("--max-model-len must be positive, or 0 for the model's length (got " +
                    std::to_string(max_model_len) + ")");
  pos("block-size", block_size);
  if (max_num_batched_tokens < block_size)
    throw UserError("--max-num-batched-tokens (" + std::to_string(max_num_batched_tokens) +
                    ") must be at least one block (--block-size " + std::to_string(block_size) + ")");
  pos("tensor-parallel-size", tensor_parallel_size);
  pos("nnodes", nnodes);
  if (tensor_parallel_size % nnodes != 0)
    throw UserError("--nnodes " + std::to_string(nnodes) + " does not divide --tensor-parallel-size " +
                    std::to_string(tensor_parallel_size) + " (every node runs the same number of ranks)");
  if (node_rank < 0 || node_rank >= nnodes)
    throw UserError("--node-rank must be in [0, " + std::to_string(nnodes) + ") (got " + std::to_string(node_rank) +
                    ")");
  if (tp_rank < 0 || tp_rank >= tensor_parallel_size)
    throw UserError("--rank must be in [0, " + std::to_string(tensor_parallel_size) + ") (got " +
                    std::to_string(tp_rank) + ")");
  if (master_port < 0 || master_port > 65535) throw UserError("--master-port must be in [0, 65535]");
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
    throw UserError("--gpu-memory-utilization must be in (0, 1] (got " + std::to_string(gpu_memory_utilization) + ")");
  if (kv_cache_memory < 0) throw UserError("--kv-cache-memory must be >= 0 bytes");
  if (device != "cpu" && device != "cuda" && device != "auto")
    throw UserError("--device must be cpu, cuda or auto (got '" + device + "')");
  if (max_logprobs < -1)
    throw UserError("--max-logprobs must be -1 (the vocabulary) or >= 0 (got " + std::to_string(max_logprobs) + ")");
  if (logprobs_mode != "raw_logprobs" && logprobs_mode != "processed_logprobs")
    throw UserError("--logprobs-mode '" + logprobs_mode +
                    "' is not implemented: use raw_logprobs (the default) or processed_logprobs (raw_logits and "
                    "processed_logits are not)");
  kernels.validate();
}

}  // namespace nanovllm
