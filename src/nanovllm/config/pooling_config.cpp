// Parsing of the pooling settings (pooling_config.h): --runner, --convert, --task, --pooler-config
// and --hf-overrides, with vLLM's spellings; everything we do not implement refused by name.
#include "nanovllm/config/pooling_config.h"

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {

using ojson = nlohmann::ordered_json;

namespace {

ojson parse_object(const std::string& text, const std::string& flag) {
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(flag + " must be a JSON object: " + e.what());
  }
  if (j.is_null()) return ojson::object();
  if (!j.is_object()) throw UserError(flag + " must be a JSON object (got " + j.dump() + ")");
  return j;
}

bool bool_of(const std::string& flag, const std::string& key, const ojson& v) {
  if (!v.is_boolean()) throw UserError(flag + ": '" + key + "' must be true or false (got " + v.dump() + ")");
  return v.get<bool>();
}

}  // namespace

const char* runner_choice_name(RunnerChoice r) {
  switch (r) {
    case RunnerChoice::Generate: return "generate";
    case RunnerChoice::Pooling: return "pooling";
    default: return "auto";
  }
}

RunnerChoice parse_runner_choice(const std::string& s, const std::string& flag) {
  if (s == "auto") return RunnerChoice::Auto;
  if (s == "generate") return RunnerChoice::Generate;
  if (s == "pooling") return RunnerChoice::Pooling;
  if (s == "draft") throw UserError(flag + " draft is not implemented (auto, generate, pooling)");
  throw UserError(flag + " must be auto, generate or pooling (got '" + s + "')");
}

const char* convert_choice_name(ConvertChoice c) {
  switch (c) {
    case ConvertChoice::None: return "none";
    case ConvertChoice::Embed: return "embed";
    case ConvertChoice::Classify: return "classify";
    default: return "auto";
  }
}

ConvertChoice parse_convert_choice(const std::string& s, const std::string& flag) {
  if (s == "auto") return ConvertChoice::Auto;
  if (s == "none") return ConvertChoice::None;
  if (s == "embed") return ConvertChoice::Embed;
  if (s == "classify") return ConvertChoice::Classify;
  if (s == "reward") throw UserError(flag + " reward is not implemented (auto, none, embed, classify)");
  throw UserError(flag + " must be auto, none, embed or classify (got '" + s + "')");
}

const char* pooling_type_name(PoolingType t) {
  switch (t) {
    case PoolingType::Mean: return "MEAN";
    case PoolingType::Cls: return "CLS";
    default: return "LAST";
  }
}

PoolingType parse_pooling_type(const std::string& s, const std::string& where) {
  std::string u;
  for (char ch : s) u += char(std::toupper(static_cast<unsigned char>(ch)));
  if (u == "LAST" || u == "LASTTOKEN") return PoolingType::Last;
  if (u == "MEAN") return PoolingType::Mean;
  if (u == "CLS") return PoolingType::Cls;
  if (u == "ALL" || u == "STEP" || u == "MAX" || u == "WEIGHTEDMEAN")
    throw UserError(where + ": pooling type '" + s + "' is not implemented (LAST, MEAN, CLS)");
  throw UserError(where + ": unknown pooling type '" + s + "' (LAST, MEAN, CLS)");
}

TaskChoice parse_task(const std::string& s, const std::string& flag) {
  if (s == "auto") return {};
  if (s == "generate") return {RunnerChoice::Generate, ConvertChoice::Auto};
  if (s == "embed" || s == "embedding") return {RunnerChoice::Pooling, ConvertChoice::Embed};
  if (s == "classify" || s == "score") return {RunnerChoice::Pooling, ConvertChoice::Classify};
  if (s == "reward" || s == "transcription" || s == "draft")
    throw UserError(flag + " " + s + " is not implemented (auto, generate, embed, embedding, classify, score)");
  throw UserError(flag + " must be auto, generate, embed, embedding, classify or score (got '" + s + "')");
}

PoolerConfig PoolerConfig::parse(const std::string& text, const std::string& flag) {
  PoolerConfig c;
  if (text.empty()) return c;
  const ojson j = parse_object(text, flag);  // (kept alive: items() is a view)
  for (auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "pooling_type") {
      if (!v.is_string()) throw UserError(flag + ": 'pooling_type' must be a string (got " + v.dump() + ")");
      c.pooling_type = parse_pooling_type(v.get<std::string>(), flag);
    } else if (key == "normalize") {
      c.normalize = bool_of(flag, key, v);
    } else if (key == "activation" || key == "softmax" || key == "use_activation") {
      c.activation = bool_of(flag, key, v);
    } else if (key == "dimensions" || key == "enable_chunked_processing" || key == "max_embed_len" ||
               key == "step_tag_id" || key == "returned_token_ids" || key == "logit_bias") {
      throw UserError(flag + ": '" + key + "' is not implemented");
    } else {
      throw UserError(flag + ": unknown key '" + key + "' (pooling_type, normalize, activation)");
    }
  }
  return c;
}

std::string PoolerConfig::to_json() const {
  ojson j = ojson::object();
  if (pooling_type) j["pooling_type"] = pooling_type_name(*pooling_type);
  if (normalize) j["normalize"] = *normalize;
  if (activation) j["activation"] = *activation;
  return j.empty() ? "" : j.dump();
}

HfOverrides HfOverrides::parse(const std::string& text, const std::string& flag) {
  HfOverrides o;
  if (text.empty()) return o;
  const ojson j = parse_object(text, flag);
  for (auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "architectures") {
      if (!v.is_array() || v.size() != 1 || !v[0].is_string())
        throw UserError(flag + ": 'architectures' must be a list of one name (got " + v.dump() + ")");
      o.architecture = v[0].get<std::string>();
    } else if (key == "classifier_from_token") {
      if (!v.is_array() || v.empty()) throw UserError(flag + ": 'classifier_from_token' must be a list of tokens");
      for (auto& t : v) {
        if (!t.is_string()) throw UserError(flag + ": 'classifier_from_token' holds a non-string " + t.dump());
        o.classifier_from_token.push_back(t.get<std::string>());
      }
    } else if (key == "is_original_qwen3_reranker") {
      o.is_original_qwen3_reranker = bool_of(flag, key, v);
    } else if (key == "method") {
      if (!v.is_string() || (v != "from_2_way_softmax" && v != "no_post_processing"))
        throw UserError(flag + ": 'method' must be from_2_way_softmax or no_post_processing (got " + v.dump() + ")");
      o.method = v.get<std::string>();
    } else if (key == "is_matryoshka") {
      o.is_matryoshka = bool_of(flag, key, v);
    } else if (key == "matryoshka_dimensions") {
      if (!v.is_array()) throw UserError(flag + ": 'matryoshka_dimensions' must be a list of sizes");
      for (auto& d : v) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1)
          throw UserError(flag + ": 'matryoshka_dimensions' holds " + d.dump() + ", not a positive size");
        o.matryoshka_dimensions.push_back(d.get<int64_t>());
      }
    } else {
      throw UserError(flag + ": '" + key +
                      "' is not implemented (architectures, classifier_from_token, is_original_qwen3_reranker, "
                      "method, is_matryoshka, matryoshka_dimensions)");
    }
  }
  if (o.is_original_qwen3_reranker && o.classifier_from_token.empty()) o.classifier_from_token = {"no", "yes"};
  if (!o.classifier_from_token.empty() && o.method.empty())
    o.method = o.classifier_from_token.size() == 2 ? "from_2_way_softmax" : "no_post_processing";
  if (o.method == "from_2_way_softmax" && o.classifier_from_token.size() != 2)
    throw UserError(flag + ": method from_2_way_softmax needs two classifier_from_token entries");
  return o;
}

std::string HfOverrides::to_json() const {
  ojson j = ojson::object();
  if (!architecture.empty()) j["architectures"] = ojson::array({architecture});
  if (!classifier_from_token.empty()) j["classifier_from_token"] = classifier_from_token;
  if (is_original_qwen3_reranker) j["is_original_qwen3_reranker"] = true;
  if (!method.empty()) j["method"] = method;
  if (is_matryoshka) j["is_matryoshka"] = *is_matryoshka;
  if (!matryoshka_dimensions.empty()) j["matryoshka_dimensions"] = matryoshka_dimensions;
  return j.empty() ? "" : j.dump();
}

const char* pooling_task_name(PoolingTask t) {
  switch (t) {
    case PoolingTask::Classify: return "classify";
    case PoolingTask::Score: return "score";
    default: return "embed";
  }
}

}  // namespace nanovllm
