// Pooling models: detection, the Sentence-Transformers files, the head and its output
// (pooling_model.h).
#include "nanovllm/models/pooling_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "nanovllm/models/causal_lm.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxSmallJson = 1 << 20;

std::optional<json> read_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  try {
    json j = json::parse(read_regular_file(p.string(), kMaxSmallJson));
    return j;
  } catch (const json::exception& e) {
    throw LoadError(p.string() + ": not valid JSON: " + e.what());
  }
}

// Sentence-Transformers: modules.json lists the pipeline (Transformer, Pooling, Normalize). Returns
// whether the layout is present; sets the pooling type and normalization it declares.
bool read_sentence_transformers(const std::string& dir, PoolingType& type, bool& normalize) {
  if (dir.empty()) return false;
  const fs::path root(dir);
  const std::optional<json> modules = read_json(root / "modules.json");
  if (!modules) return false;
  if (!modules->is_array()) throw LoadError((root / "modules.json").string() + ": not a list of modules");
  normalize = false;
  for (const json& m : *modules) {
    const std::string t = m.is_object() ? m.value("type", "") : "";
    const std::string kind = t.substr(t.rfind('.') + 1);
    if (kind == "Transformer") continue;
    if (kind == "Normalize") {
      normalize = true;
    } else if (kind == "Pooling") {
      const fs::path pc = root / m.value("path", "1_Pooling") / "config.json";
      const std::optional<json> c = read_json(pc);
      if (!c || !c->is_object()) throw LoadError(pc.string() + ": missing or not a JSON object");
      if (!c->value("include_prompt", true)) throw LoadError(pc.string() + ": include_prompt false is not implemented");
      if (c->contains("pooling_mode")) {  // sentence-transformers 5+: one string
        const json& v = (*c)["pooling_mode"];
        const std::string mode = v.is_string() ? v.get<std::string>() : "";
        if (mode == "lasttoken")
          type = PoolingType::Last;
        else if (mode == "mean" || mode == "mean_tokens")
          type = PoolingType::Mean;
        else if (mode == "cls" || mode == "cls_token")
          type = PoolingType::Cls;
        else
          throw LoadError(pc.string() + ": pooling_mode '" + (v.is_string() ? mode : v.dump()) +
                          "' is not implemented (lasttoken, mean, cls)");
        continue;
      }
      for (const char* unsupported :
           {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
        if (c->value(unsupported, false))
          throw LoadError(pc.string() + ": " + unsupported + " is not implemented (lasttoken, mean_tokens, cls_token)");
      const int n = int(c->value("pooling_mode_lasttoken", false)) + int(c->value("pooling_mode_mean_tokens", false)) +
                    int(c->value("pooling_mode_cls_token", false));
      if (n != 1) throw LoadError(pc.string() + ": exactly one of lasttoken, mean_tokens, cls_token must be set");
      type = c->value("pooling_mode_lasttoken", false)     ? PoolingType::Last
             : c->value("pooling_mode_mean_tokens", false) ? PoolingType::Mean
                                                           : PoolingType::Cls;
    } else {
      throw LoadError((root / "modules.json").string() + ": the Sentence-Transformers module '" + t +
                      "' is not implemented (Transformer, Pooling, Normalize)");
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> PoolingModel::supported_tasks() const {
  if (classify) return {"classify", "score"};
  return {"embed", "score"};
}

std::optional<PoolingModel> resolve_pooling_model(const EngineConfig& cfg, const ModelConfig& mcfg,
                                                  const std::string& dir) {
  PoolingType st_type = PoolingType::Last;
  bool st_normalize = true;
  const bool st = read_sentence_transformers(dir, st_type, st_normalize);
  const bool from_tokens = !cfg.hf_overrides.classifier_from_token.empty() || !cfg.classifier_token_ids.empty();
  const std::string& arch = cfg.hf_overrides.architecture;
  if (!arch.empty() && arch.ends_with("ForSequenceClassification") && mcfg.num_labels == 0 && !from_tokens)
    throw UserError("--hf-overrides architectures " + arch +
                    ": a causal LM checkpoint has no score.weight; add "
                    "classifier_from_token (e.g. Qwen3-Reranker: is_original_qwen3_reranker)");
  const bool seq_cls = mcfg.num_labels > 0 || (!arch.empty() && arch.ends_with("ForSequenceClassification"));
  bool pooling = cfg.runner == RunnerChoice::Pooling;
  if (cfg.runner == RunnerChoice::Auto)
    pooling = st || seq_cls || cfg.convert == ConvertChoice::Embed || cfg.convert == ConvertChoice::Classify;
  if (!pooling) {
    if (cfg.convert == ConvertChoice::Embed || cfg.convert == ConvertChoice::Classify)
      throw UserError("--convert " + std::string(convert_choice_name(cfg.convert)) + " needs --runner pooling");
    if (!cfg.pooler_config.to_json().empty()) throw UserError("--pooler-config needs --runner pooling");
    return std::nullopt;
  }
  if (cfg.tensor_parallel_size > 1)
    throw UserError("--runner pooling does not run with tensor parallelism yet (--tensor-parallel-size 1)");
  if (cfg.speculative_config.enabled()) throw UserError("--speculative-config does not apply to --runner pooling");
  PoolingModel pm;
  pm.model_name = cfg.model;
  pm.hidden_size = mcfg.hidden_size;
  pm.classify =
      cfg.convert == ConvertChoice::Classify || (cfg.convert == ConvertChoice::Auto && (seq_cls || from_tokens));
  if (cfg.convert == ConvertChoice::Embed && seq_cls)
    throw UserError("--convert embed: " + mcfg.declared_architecture + " is a classification model");
  if (pm.classify && !seq_cls && !from_tokens)
    throw UserError(
        "--convert classify needs a *ForSequenceClassification checkpoint (score.weight) or "
        "--hf-overrides classifier_from_token");
  pm.type = st ? st_type : PoolingType::Last;
  pm.normalize = st ? st_normalize : true;
  if (cfg.pooler_config.pooling_type) pm.type = *cfg.pooler_config.pooling_type;
  if (cfg.pooler_config.normalize) pm.normalize = *cfg.pooler_config.normalize;
  if (cfg.pooler_config.activation) pm.activation = *cfg.pooler_config.activation;
  pm.score_from_checkpoint = pm.classify && seq_cls && !from_tokens;
  pm.num_labels = pm.score_from_checkpoint ? std::max<int64_t>(mcfg.num_labels, 1) : 0;
  pm.is_matryoshka = cfg.hf_overrides.is_matryoshka.value_or(mcfg.is_matryoshka);
  pm.matryoshka_dimensions = mcfg.matryoshka_dimensions;
  if (!cfg.hf_overrides.matryoshka_dimensions.empty()) {
    pm.is_matryoshka = cfg.hf_overrides.is_matryoshka.value_or(true);
    pm.matryoshka_dimensions = cfg.hf_overrides.matryoshka_dimensions;
  }
  return pm;
}

void adapt_weight_specs(PoolingModel& pm, const SafetensorsCheckpoint* ckpt, std::vector<WeightSpec>& specs) {
  pm.weights_without_prefix = ckpt && !ckpt->find("model.embed_tokens.weight") && ckpt->find("embed_tokens.weight");
  for (WeightSpec& s : specs) {
    if (s.name == "lm_head.weight") s.optional = true;  // a classification or embedding checkpoint has none
    if (pm.weights_without_prefix && s.name.rfind("model.", 0) == 0) s.name = s.name.substr(6);
  }
}

void load_pooling_head(PoolingModel& pm, const EngineConfig& cfg, const SafetensorsCheckpoint* ckpt, Backend& be,
                       CausalLM& model) {
  if (!pm.classify) return;
  const int64_t H = pm.hidden_size;
  if (pm.score_from_checkpoint) {
    pm.score_weight.assign(size_t(pm.num_labels * H), 0.0f);
    if (!ckpt) {  // dummy weights
      std::mt19937 rng(12345);
      std::normal_distribution<float> d(0.0f, 0.02f);
      for (float& w : pm.score_weight) w = d(rng);
      return;
    }
    const TensorInfo& t = ckpt->get(ckpt->find("score.weight") ? "score.weight" : "classifier.weight");
    if (t.shape != std::vector<int64_t>{pm.num_labels, H})
      throw LoadError(t.file + ": " + t.name + " has shape [" + std::to_string(t.shape.at(0)) + ", ...], expected [" +
                      std::to_string(pm.num_labels) + ", " + std::to_string(H) + "] (num_labels, hidden_size)");
    convert_to_f32(t.data, t.dtype, size_t(t.numel()), pm.score_weight.data());
    return;
  }
  // classifier_from_token: the tokens' LM-head rows (tied: the embedding's).
  const std::vector<int32_t>& ids = cfg.classifier_token_ids;
  if (ids.empty())
    throw UserError("--hf-overrides classifier_from_token: the tokens were not resolved to ids (no tokenizer)");
  LMHead* head = model.lm_head();
  if (!head || head->weight_scales.defined())
    throw UserError("classifier_from_token needs an unquantized LM head (--quantization int8 converts it)");
  for (int32_t id : ids)
    if (id < 0 || id >= head->weight.size(0))
      throw UserError("classifier_from_token: token id " + std::to_string(id) + " is outside the vocabulary");
  Tensor rows = be.empty({int64_t(ids.size()), H}, head->weight.dtype());
  be.gather_rows(head->weight, ids, rows);
  const std::vector<float> w = be.to_host_f32(rows);
  if (cfg.hf_overrides.method == "no_post_processing" || ids.size() != 2) {
    pm.num_labels = int64_t(ids.size());
    pm.score_weight = w;
  } else {  // from_2_way_softmax: one label, rows[1] - rows[0]
    pm.num_labels = 1;
    pm.score_weight.resize(size_t(H));
    for (int64_t k = 0; k < H; ++k) pm.score_weight[size_t(k)] = w[size_t(H + k)] - w[size_t(k)];
  }
}

void check_pooling_params(const PoolingModel& pm, const PoolingParams& p) {
  const std::vector<std::string> tasks = pm.supported_tasks();
  if (std::find(tasks.begin(), tasks.end(), pooling_task_name(p.task)) == tasks.end()) {
    std::string list;
    for (auto& t : tasks) list += (list.empty() ? "'" : ", '") + t + "'";
    throw InvalidRequest("task", "pooling_task must be one of [" + list + "] (got '" + pooling_task_name(p.task) +
                                     "'): the model is " + (pm.classify ? "a classification" : "an embedding") +
                                     " model");
  }
  const bool embed = !pm.classify;
  if (embed && p.activation)
    throw InvalidRequest("activation",
                         "Task embed only supports ['dimensions', 'normalize'] parameters, does not "
                         "support ['activation'] parameters");
  if (!embed && (p.dimensions || p.normalize))
    throw InvalidRequest(p.dimensions ? "dimensions" : "normalize",
                         std::string("Task ") + pooling_task_name(p.task) +
                             " only supports ['activation'] parameters, does not support ['" +
                             (p.dimensions ? "dimensions" : "normalize") + "'] parameters");
  if (!p.dimensions) return;
  if (!pm.is_matryoshka)
    throw InvalidRequest("dimensions", "Model \"" + pm.model_name +
                                           "\" does not support matryoshka representation, changing output "
                                           "dimensions will lead to poor results.");
  if (*p.dimensions < 1) throw InvalidRequest("dimensions", "Dimensions must be greater than 0");
  const auto& mds = pm.matryoshka_dimensions;
  if (!mds.empty() && std::find(mds.begin(), mds.end(), *p.dimensions) == mds.end()) {
    std::string list;
    for (int64_t d : mds) list += (list.empty() ? "" : ", ") + std::to_string(d);
    throw InvalidRequest("dimensions", "Model \"" + pm.model_name + "\" only supports [" + list +
                                           "] matryoshka dimensions, use other output dimensions will lead to poor "
                                           "results.");
  }
  if (*p.dimensions > pm.hidden_size)
    throw InvalidRequest("dimensions", "Dimensions " + std::to_string(*p.dimensions) +
                                           " is larger than the model's hidden size " + std::to_string(pm.hidden_size));
}

std::vector<float> pooling_output(const PoolingModel& pm, const PoolingParams& p, const std::vector<double>& pooled) {
  if (!pm.classify) {
    const size_t n = p.dimensions ? size_t(*p.dimensions) : pooled.size();
    std::vector<double> v(pooled.begin(), pooled.begin() + int64_t(n));
    if (p.normalize.value_or(pm.normalize)) {
      double ss = 0;
      for (double x : v) ss += x * x;
      const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);  // torch.nn.functional.normalize's eps
      for (double& x : v) x *= inv;
    }
    return {v.begin(), v.end()};
  }
  const int64_t H = pm.hidden_size, L = pm.num_labels;
  std::vector<double> logits(size_t(L), 0.0);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t k = 0; k < H; ++k) logits[size_t(l)] += double(pm.score_weight[size_t(l * H + k)]) * pooled[size_t(k)];
  if (p.activation.value_or(pm.activation)) {
    if (L == 1) {
      logits[0] = 1.0 / (1.0 + std::exp(-logits[0]));
    } else {
      const double m = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (double& x : logits) sum += (x = std::exp(x - m));
      for (double& x : logits) x /= sum;
    }
  }
  return {logits.begin(), logits.end()};
}

}  // namespace nanovllm
