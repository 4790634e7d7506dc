// What the engine needs from a model architecture, and the registry that builds one from a
// ModelConfig. Architectures register in models/registry.cpp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/communicator.h"
#include "nanovllm/config/config.h"
#include "nanovllm/layers/attention.h"
#include "nanovllm/layers/embed_head.h"
#include "nanovllm/layers/linear.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

// Diagnostics: sees the residual stream [T, H] of a layer at a stage: 0 = after the attention
// block's residual add, 1 = the layer's output (after the MLP's residual add). Called between
// ops, so it may read the tensor back (a device sync): set it only around eager steps, never
// while CUDA graphs are captured.
using LayerObserver = std::function<void(int64_t layer, int stage, const Tensor& stream)>;

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  LayerObserver layer_observer;  // see above; empty: not called
  // Every parameter and the checkpoint tensor(s) it loads from.
  virtual std::vector<WeightSpec> weight_specs() = 0;
  // Called after loading (ties the LM head to the embedding when configured).
  virtual void finalize_weights() = 0;
  // KernelOptions::norm_fold, after loading and quantization: folds the decoder layers' norm
  // weights into the unquantized projections after them (models/norm_fold.h). Returns how many
  // norms it folded (0: none, the default).
  virtual int64_t fold_rms_norms() { return 0; }
  // The linear layers --quantization converts after loading (quantize_weights.h): the decoder's
  // dense projections, not the embedding, the LM head or MoE experts. Empty: no quantized path.
  virtual std::vector<Linear*> quantizable_linears() { return {}; }
  // The stacked weights of MoE experts that weight_specs fills, one checkpoint expert tensor a row
  // range (Qwen3-MoE's w13 [E * 2I, H] and w2 [E * H, I]). awq, gptq and compressed-tensors hold
  // them dequantized (models/int_experts.h); fp8 and int8 refuse a model that has any.
  virtual std::vector<const Tensor*> moe_expert_weights() { return {}; }
  // The LM head, which --quantization int8 converts too (as llama.cpp's Q8_0 does its output
  // matrix: a third of a Qwen3-0.6B decode step's bytes); null: none to convert.
  virtual LMHead* lm_head() { return nullptr; }
  // ids, positions: [T] I32 -> final hidden states [T, H]. With rows (ascending, each in [0, T)):
  // only those rows' final hidden states, [rows.size(), H] in their order; every row still goes
  // through every layer's attention (its K/V into the cache), but the last layer's o_proj and MLP
  // and the final norm may run on those rows alone (a prefill's sampled or pooled rows: 1 / L of the
  // products of the rows nobody reads).
  virtual Tensor forward(const Tensor& ids, const Tensor& positions, std::vector<LayerKVCache>& kv,
                         const AttentionMetadata& md, const std::vector<int32_t>* rows = nullptr) = 0;
  // hidden [T, H], rows of each sequence's last token -> logits [B, V].
  virtual Tensor compute_logits(const Tensor& hidden, const std::vector<int32_t>& last_rows) = 0;
  // The token embedding table [V, H] (an EAGLE-3 head without its own reads it); null where the
  // model has no whole table (a tensor-parallel shard).
  virtual const Tensor* embedding_table() const { return nullptr; }

  // EAGLE-3's target side (engine/eagle3_drafter.h). After capture_aux_hidden(layers, max_tokens),
  // every forward of T <= max_tokens tokens (larger ones: none) copies the residual stream entering each of `layers`
  // (ascending; 0: the embedding output) into aux_hidden_states(): rows [j * max_tokens,
  // j * max_tokens + T) hold layer j's [T, H]. The buffer is allocated here, once, outside any step,
  // and written by device copies inside the forward: a CUDA graph captured afterwards replays the
  // copies into the same static buffer, so decode steps keep their graphs. Without a call (EAGLE
  // off) forward does nothing more. Throws where the architecture cannot (its own forward).
  virtual void capture_aux_hidden(const std::vector<int64_t>& layers, int64_t max_tokens);
  const Tensor& aux_hidden_states() const { return aux_hidden_; }  // [n * max_tokens, H]; undefined: off
  int64_t aux_rows_per_layer() const { return aux_max_tokens_; }

 protected:
  std::vector<int64_t> aux_layers_;
  Tensor aux_hidden_;
  int64_t aux_max_tokens_ = 0;
};

// comm: the rank's collectives under tensor parallelism (the model then holds this rank's shard
// of every sharded weight), nullptr for one rank.
std::unique_ptr<CausalLM> create_model(const ModelConfig& cfg, Backend& be, Communicator* comm = nullptr);

// Throws UserError unless `world` ranks can split the model: it must divide the attention heads,
// the KV heads, the intermediate size and the vocabulary. Cheap: call before any GPU work.
void validate_tensor_parallel(const ModelConfig& cfg, int world);

}  // namespace nanovllm
