// tokenizer.json "decoder" for vocabularies that are not byte-level (SentencePiece-style BPE:
// Llama 2, Mistral): ids -> token strings -> the decoder chain -> text, as Hugging Face tokenizers
// does it. Supported steps: Replace (String pattern), ByteFallback ("<0x0A>" tokens back to bytes),
// Fuse, Strip, Metaspace, and Sequences of them; no decoder joins the tokens with spaces (as
// Hugging Face does). Byte-level vocabularies (ByteLevel decoder or pre-tokenizer) are decoded by
// HfTokenizer directly from raw bytes and never reach this class.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm {

class TokenDecoder {
 public:
  // `config` is the "decoder" value (may be null). Throws TokenizerError on unsupported types.
  // `byte_level` is set when the chain contains a ByteLevel step.
  TokenDecoder(const nlohmann::json& config, bool* byte_level);

  // Token strings (vocabulary spellings, added tokens' contents) -> text.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel };
  struct Step {
    Kind kind;
    std::string a, b;         // Replace: pattern, content; Strip: content; Metaspace: replacement
    int start = 0, stop = 0;  // Strip
    bool prepend = true;      // Metaspace: prepend_scheme != never (strip the first token's space)
  };
  void add(const nlohmann::json& config, int depth, bool* byte_level);
  std::vector<Step> steps_;
  bool none_ = true;  // no decoder at all: tokens joined with " "
};

}  // namespace nanovllm
