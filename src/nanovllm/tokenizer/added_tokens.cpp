// Added-token matching. Scanning is linear in the text for realistic token sets: a table of
// possible first bytes skips most positions, and a trie walk finds the longest token at the rest.
#include "nanovllm/tokenizer/added_tokens.h"

#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

// Whitespace for lstrip/rstrip and word characters for single_word. Simplification: ASCII
// whitespace only (HF also strips Unicode spaces, which are rare next to special tokens), and every
// non-ASCII byte counts as part of a word.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<const AddedToken*>& tokens) {
  nodes_.assign(1, Node());
  for (const AddedToken* t : tokens) {
    if (t->content.empty()) continue;
    int32_t cur = 0;
    for (char c : t->content) {
      const auto b = static_cast<uint8_t>(c);
      auto it = nodes_[cur].next.find(b);
      if (it == nodes_[cur].next.end()) {
        nodes_.push_back(Node());
        const auto idx = static_cast<int32_t>(nodes_.size() - 1);
        nodes_[cur].next.emplace(b, idx);
        cur = idx;
      } else {
        cur = it->second;
      }
    }
    if (!nodes_[cur].token) nodes_[cur].token = t;  // the first listed wins on duplicates
    first_byte_[static_cast<uint8_t>(t->content[0])] = true;
  }
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, size_t i, size_t* end) const {
  const AddedToken* best = nullptr;
  int32_t cur = 0;
  for (size_t j = i; j < text.size(); ++j) {
    auto it = nodes_[cur].next.find(static_cast<uint8_t>(text[j]));
    if (it == nodes_[cur].next.end()) break;
    cur = it->second;
    const AddedToken* t = nodes_[cur].token;
    if (!t) continue;
    if (t->single_word && ((i > 0 && is_word_byte(text[i - 1])) || (j + 1 < text.size() && is_word_byte(text[j + 1]))))
      continue;
    best = t;
    *end = j + 1;
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, const std::function<void(std::string_view)>& on_text,
                              const std::function<void(int32_t)>& on_token) const {
  if (empty()) {
    if (!text.empty()) on_text(text);
    return;
  }
  size_t emitted = 0;  // text[emitted..] is not yet reported
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    size_t end = 0;
    const AddedToken* t = longest_at(text, i, &end);
    if (!t) continue;
    size_t begin = i;
    if (t->lstrip)
      while (begin > emitted && is_space(text[begin - 1])) --begin;
    if (t->rstrip)
      while (end < text.size() && is_space(text[end])) ++end;
    if (begin > emitted) on_text(text.substr(emitted, begin - emitted));
    on_token(t->id);
    emitted = end;
    i = end - 1;
  }
  if (emitted < text.size()) on_text(text.substr(emitted));
}

AddedVocabulary::AddedVocabulary(const nlohmann::json& added_tokens) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) throw TokenizerError("tokenizer.json: \"added_tokens\" is not an array");
  tokens_.reserve(added_tokens.size());
  for (const auto& j : added_tokens) {
    if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer() || !j.contains("content") ||
        !j["content"].is_string())
      throw TokenizerError("tokenizer.json: added token without an integer \"id\" and a \"content\"");
    AddedToken t;
    if (j["id"].get<int64_t>() > kMaxTokenId)
      throw TokenizerError("tokenizer.json: added token id " + j["id"].dump() + " is above the supported " +
                           std::to_string(kMaxTokenId));
    t.id = j["id"].get<int32_t>();
    t.content = j["content"].get<std::string>();
    t.special = j.value("special", false);
    t.normalized = j.value("normalized", !t.special);  // HF default: special tokens are not normalized
    t.lstrip = j.value("lstrip", false);
    t.rstrip = j.value("rstrip", false);
    t.single_word = j.value("single_word", false);
    if (t.id < 0) throw TokenizerError("tokenizer.json: added token '" + t.content + "' has a negative id");
    tokens_.push_back(std::move(t));
  }
  std::vector<const AddedToken*> raw, norm;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_id_.emplace(tokens_[i].id, i);
    by_content_.emplace(tokens_[i].content, tokens_[i].id);
    (tokens_[i].normalized ? norm : raw).push_back(&tokens_[i]);
  }
  raw_.build(raw);
  normalized_.build(norm);
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace nanovllm
