// What the engine needs from a model architecture, and the registry that builds one from a
// ModelConfig. Qwen3 is the first; others register in models/registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/layers/attention.h"
#include "nanovllm/models/weights.h"
#include "nanovllm/ops/backend.h"

namespace nanovllm {

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  // Every parameter and the checkpoint tensor(s) it loads from.
  virtual std::vector<WeightSpec> weight_specs() = 0;
  // Called after loading (ties the LM head to the embedding when configured).
  virtual void finalize_weights() = 0;
  // ids, positions: [T] I32 -> final hidden states [T, H].
  virtual Tensor forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv,
                         const AttentionMetadata& md) = 0;
  // hidden [T, H], rows of each sequence's last token -> logits [B, V].
  virtual Tensor compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) = 0;
};

std::unique_ptr<CausalLM> create_model(const ModelConfig& cfg, Backend& be);

}  // namespace nanovllm
