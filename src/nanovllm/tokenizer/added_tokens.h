// tokenizer.json "added_tokens": special and added tokens that are cut out of the text before
// pre-tokenization, leftmost-longest as Hugging Face does. Tokens with normalized=false are matched
// on the raw text, those with normalized=true on the normalized text; lstrip/rstrip let a match
// swallow the whitespace next to it and single_word requires word boundaries around it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false, rstrip = false, single_word = false;
};

// Leftmost-longest matcher over one set of added tokens (a byte trie).
class AddedTokenMatcher {
 public:
  void build(const std::vector<const AddedToken*>& tokens);
  bool empty() const { return nodes_.size() <= 1; }
  // Calls on_text(segment) for unmatched text and on_token(id) for each match, in order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  struct Node {
    std::unordered_map<uint8_t, int32_t> next;
    const AddedToken* token = nullptr;  // a token ends here
  };
  // Longest token starting at text[i] that passes its flags: (token, match end) or null.
  const AddedToken* longest_at(std::string_view text, size_t i, size_t* end) const;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  explicit AddedVocabulary(const nlohmann::json& added_tokens);  // the JSON array (or null)
  const AddedTokenMatcher& raw() const { return raw_; }
  const AddedTokenMatcher& normalized() const { return normalized_; }
  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  AddedTokenMatcher raw_, normalized_;
};

}  // namespace nanovllm
