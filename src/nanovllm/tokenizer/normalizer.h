// tokenizer.json "normalizer": Unicode normalization forms (NFC, NFD, NFKC, NFKD) via utf8proc,
// Prepend and Replace (String pattern; SentencePiece-style vocabularies: Llama 2, Mistral), a
// Sequence of them, or none. Other types are refused at load time.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm {

class Normalizer {
 public:
  // `config` is the "normalizer" value (may be null). Throws TokenizerError on unsupported types.
  explicit Normalizer(const nlohmann::json& config);
  bool is_identity() const { return steps_.empty(); }
  // Normalizes valid UTF-8 `in`. Returns `in` itself when nothing changes (no copy), else a view
  // of `storage`.
  std::string_view apply(std::string_view in, std::string& storage) const;

 private:
  void add(const nlohmann::json& config, int depth);
  struct Step {
    int form = 0;  // utf8proc option set; 0: a Prepend (text = a + text, unless empty) or Replace
    bool prepend = false;
    std::string a, b;  // Prepend: a; Replace: every a becomes b
  };
  std::vector<Step> steps_;  // applied in order
};

}  // namespace nanovllm
