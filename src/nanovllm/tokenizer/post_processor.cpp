// Reads the special tokens of a post-processor's single-sequence template.
#include "nanovllm/tokenizer/post_processor.h"

#include <string>

#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

constexpr int kMaxNesting = 64;  // as the other components: hostile files must not overflow the stack

int32_t checked_id(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId)
    throw TokenizerError("tokenizer.json: post_processor " + what + " has no valid token id");
  return v.get<int32_t>();
}

}  // namespace

PostProcessor::PostProcessor(const nlohmann::json& config) {
  if (!config.is_null()) add(config, 1);
}

void PostProcessor::add(const nlohmann::json& config, int depth) {
  if (depth > kMaxNesting)
    throw TokenizerError("tokenizer.json: post_processor Sequences nested deeper than " + std::to_string(kMaxNesting) +
                         " levels");
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw TokenizerError("tokenizer.json: post_processor without a \"type\"");
  const std::string type = config["type"];
  if (type == "ByteLevel") return;  // trims offsets only
  if (type == "Sequence") {
    if (!config.contains("processors") || !config["processors"].is_array())
      throw TokenizerError("tokenizer.json: Sequence post_processor without \"processors\"");
    for (const auto& p : config["processors"]) add(p, depth + 1);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {  // "cls": [token, id], "sep": [token, id]
    for (const char* key : {"cls", "sep"}) {
      const auto& v = config.value(key, nlohmann::json());
      if (!v.is_array() || v.size() != 2) throw TokenizerError("tokenizer.json: " + type + " without \"" + key + "\"");
      (key[0] == 'c' ? prefix : suffix).push_back(checked_id(v[1], type + " " + key));
    }
    return;
  }
  if (type != "TemplateProcessing")
    throw TokenizerError("tokenizer.json: unsupported post_processor type '" + type + "'");
  const auto& single = config.value("single", nlohmann::json());
  const auto& specials = config.value("special_tokens", nlohmann::json::object());
  if (!single.is_array()) throw TokenizerError("tokenizer.json: TemplateProcessing without a \"single\" template");
  if (!specials.is_object())
    throw TokenizerError("tokenizer.json: TemplateProcessing's \"special_tokens\" is not an object");
  bool after = false;  // past the sequence ("A")
  for (const auto& piece : single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      if (after) throw TokenizerError("tokenizer.json: TemplateProcessing's single template has two sequences");
      after = true;
    } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
               piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string()) {
      const std::string name = piece["SpecialToken"]["id"];
      if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array())
        throw TokenizerError("tokenizer.json: TemplateProcessing uses special token '" + name +
                             "', which its \"special_tokens\" does not define");
      for (const auto& id : specials[name]["ids"])
        (after ? suffix : prefix).push_back(checked_id(id, "'" + name + "'"));
    } else {
      throw TokenizerError(
          "tokenizer.json: TemplateProcessing's single template has an entry that is neither "
          "a Sequence nor a SpecialToken");
    }
  }
  if (!after) throw TokenizerError("tokenizer.json: TemplateProcessing's single template has no sequence");
}

}  // namespace nanovllm
