// Pooling models (embeddings, classification, scoring), as vLLM 0.11+ spells them:
//  - the engine's runner (--runner auto|generate|pooling) and conversion of a causal LM
//    (--convert auto|none|embed|classify); vLLM's older --task (embed / embedding / classify / score /
//    generate / auto) maps onto those two, its other tasks are refused by name;
//  - --pooler-config (vLLM's PoolerConfig JSON, alias --override-pooler-config): pooling_type LAST /
//    MEAN / CLS, normalize, activation ("softmax" is vLLM's older name); other keys refused by name;
//  - --hf-overrides (a JSON object): only what pooling reads (architectures, classifier_from_token,
//    is_original_qwen3_reranker, method "from_2_way_softmax" / "no_post_processing" on a token list,
//    is_matryoshka, matryoshka_dimensions); anything else refused by name;
//  - PoolingParams: one request's task and options (vLLM's PoolingParams).
// The model side (what the checkpoint declares, the head's weights) is models/pooling_model.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

enum class RunnerChoice { Auto, Generate, Pooling };
enum class ConvertChoice { Auto, None, Embed, Classify };
enum class PoolingType { Last, Mean, Cls };

const char* runner_choice_name(RunnerChoice r);
RunnerChoice parse_runner_choice(const std::string& s, const std::string& flag = "--runner");
const char* convert_choice_name(ConvertChoice c);
ConvertChoice parse_convert_choice(const std::string& s, const std::string& flag = "--convert");
const char* pooling_type_name(PoolingType t);  // vLLM's upper-case names: LAST, MEAN, CLS
PoolingType parse_pooling_type(const std::string& s, const std::string& where);

// vLLM's --task (deprecated there): sets runner and convert. Throws UserError naming `flag` for a
// task we do not serve (reward, transcription, draft, ...).
struct TaskChoice {
  RunnerChoice runner = RunnerChoice::Auto;
  ConvertChoice convert = ConvertChoice::Auto;
};
TaskChoice parse_task(const std::string& s, const std::string& flag = "--task");

struct PoolerConfig {
  std::optional<PoolingType> pooling_type;  // unset: the model's (Sentence-Transformers config, else LAST)
  std::optional<bool> normalize;            // embeddings: unit L2 norm (unset: the model's, else true)
  std::optional<bool> activation;           // classification: sigmoid (1 label) / softmax (unset: true)
  static PoolerConfig parse(const std::string& text, const std::string& flag);
  std::string to_json() const;  // "" when nothing is set
};

struct HfOverrides {
  std::string architecture;                        // replaces config.json's architectures[0]
  std::vector<std::string> classifier_from_token;  // score head = these tokens' LM-head rows
  bool is_original_qwen3_reranker = false;         // Qwen3-Reranker: ["no", "yes"], sigmoid(yes - no)
  std::string method;                              // from_2_way_softmax (default for 2 tokens) | no_post_processing
  std::optional<bool> is_matryoshka;               // over config.json's (Qwen3-Embedding declares none)
  std::vector<int64_t> matryoshka_dimensions;
  static HfOverrides parse(const std::string& text, const std::string& flag);
  std::string to_json() const;  // "" when nothing is set
  bool empty() const { return to_json().empty(); }
};

// What a pooling request asks (vLLM's PoolingParams); the engine checks it against the model.
enum class PoolingTask { Embed, Classify, Score };
const char* pooling_task_name(PoolingTask t);
struct PoolingParams {
  PoolingTask task = PoolingTask::Embed;
  std::optional<int64_t> dimensions;  // Matryoshka: keep the first `dimensions` values (then normalize)
  std::optional<bool> normalize;      // embed: unset -> the model's
  std::optional<bool> activation;     // classify / score: unset -> the model's (true)
};

}  // namespace nanovllm
