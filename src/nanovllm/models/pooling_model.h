// The model side of pooling (vLLM's pooler + as_embedding_model / as_seq_cls_model adapters):
// whether a model runs as a pooling model, how its hidden states are pooled, and its head.
//  - Detection (--runner auto): a Sentence-Transformers layout (modules.json) or a
//    *ForSequenceClassification checkpoint is a pooling model; --convert auto picks classify for the
//    latter or for hf_overrides' classifier_from_token, else embed.
//  - Pooling: LAST / MEAN / CLS over the final-normed hidden states of the prompt: --pooler-config,
//    else 1_Pooling/config.json, else LAST (vLLM's default for decoder models). Embeddings are
//    normalized when modules.json lists a Normalize module (Sentence-Transformers layout without it:
//    not), else by vLLM's default (normalized).
//  - Heads: embed: the pooled vector, cut to `dimensions` (Matryoshka) then L2-normalized.
//    classify: logits = score.weight [num_labels, H] x pooled, then sigmoid (1 label) or softmax;
//    classifier_from_token builds score.weight from the tokens' LM-head rows: two tokens with
//    from_2_way_softmax (Qwen3-Reranker: ["no", "yes"]) give one label, rows[1] - rows[0], so
//    sigmoid(yes - no) = softmax([no, yes])[yes]; no_post_processing keeps one label per token.
// The head's weights are small ([num_labels, H]): kept on the host, applied in double per request.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/config/config.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

class SafetensorsCheckpoint;
class CausalLM;

struct PoolingModel {
  bool classify = false;  // a classification head (else embeddings)
  PoolingType type = PoolingType::Last;
  bool normalize = true;   // embed: the default of a request's `normalize`
  bool activation = true;  // classify: the default of a request's `activation`
  int64_t hidden_size = 0;
  int64_t num_labels = 0;              // classify
  std::vector<float> score_weight;     // classify: [num_labels, hidden_size]
  bool score_from_checkpoint = false;  // score.weight (a *ForSequenceClassification checkpoint)
  bool weights_without_prefix =
      false;  // Sentence-Transformers' saved Qwen3Model: "layers.0..." not "model.layers.0..."
  bool is_matryoshka = false;
  std::vector<int64_t> matryoshka_dimensions;
  std::string model_name;  // in vLLM's messages

  std::vector<std::string> supported_tasks() const;  // vLLM's names: embed / classify, score
};

// The pooling model cfg describes, or nullopt when it runs as a generate model. `dir`: the model
// directory (empty: a preset). Throws UserError for a combination we cannot run (--runner pooling
// with tensor parallelism, a Sentence-Transformers module we do not implement, ...).
std::optional<PoolingModel> resolve_pooling_model(const EngineConfig& cfg, const ModelConfig& mcfg,
                                                  const std::string& dir);

// Before loading: a classification checkpoint has no lm_head.weight (made optional); the
// Sentence-Transformers layout's tensors lack the "model." prefix (dropped from the names).
void adapt_weight_specs(PoolingModel& pm, const SafetensorsCheckpoint* ckpt, std::vector<WeightSpec>& specs);

// After loading: the classification head, from the checkpoint's score.weight (dummy weights:
// seeded random values, std 0.02), or from the LM-head rows of cfg.classifier_token_ids.
void load_pooling_head(PoolingModel& pm, const EngineConfig& cfg, const SafetensorsCheckpoint* ckpt, Backend& be,
                       CausalLM& model);

// Throws InvalidRequest (vLLM's messages) when `p` does not fit the model: a task it does not
// support, dimensions on a model without Matryoshka or not among its sizes.
void check_pooling_params(const PoolingModel& pm, const PoolingParams& p);

// The request's output from the pooled hidden state [H]: an embedding, or the head's scores.
std::vector<float> pooling_output(const PoolingModel& pm, const PoolingParams& p, const std::vector<double>& pooled);

}  // namespace nanovllm
