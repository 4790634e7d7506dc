// tokenizer.json "normalizer": Unicode normalization forms (NFC, NFD, NFKC, NFKD) via utf8proc,
// or a Sequence of them, or none. Other types are refused at load time.
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
  bool is_identity() const { return forms_.empty(); }
  // Normalizes valid UTF-8 `in`. Returns `in` itself when nothing changes (no copy), else a view
  // of `storage`.
  std::string_view apply(std::string_view in, std::string& storage) const;

 private:
  void add(const nlohmann::json& config, int depth);
  std::vector<int> forms_;  // utf8proc option sets, applied in order
};

}  // namespace nanovllm
