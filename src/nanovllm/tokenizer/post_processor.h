// tokenizer.json "post_processor": the special tokens an encode with add_special_tokens adds
// around a single sequence (Llama 2/3 and Mistral: BOS in front; Qwen: none). Supported:
// TemplateProcessing (its "single" template), ByteLevel (adds nothing), BertProcessing and
// RobertaProcessing (cls in front, sep behind) and Sequences of them. Others are refused at load.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm {

struct PostProcessor {
  // `config` is the "post_processor" value (may be null). Throws TokenizerError naming what is wrong.
  PostProcessor() = default;
  explicit PostProcessor(const nlohmann::json& config);
  std::vector<int32_t> prefix, suffix;  // ids before and after the text's ids

 private:
  void add(const nlohmann::json& config, int depth);
};

}  // namespace nanovllm
