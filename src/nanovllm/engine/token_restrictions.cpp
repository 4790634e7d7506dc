#include "nanovllm/engine/token_restrictions.h"

#include <algorithm>
#include <memory>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

void check_ids(const std::vector<int32_t>& ids, int64_t vocab, const char* field, const char* what) {
  for (int32_t t : ids)
    if (t < 0 || t >= vocab) throw InvalidRequest(field, what);
}

}  // namespace

std::unique_ptr<TokenRestrictions> TokenRestrictions::of(const SamplingParams& params, int64_t vocab_size) {
  if (params.allowed_token_ids.empty() && params.bad_words_token_ids.empty()) return nullptr;
  auto r = std::make_unique<TokenRestrictions>();
  r->words_ = size_t(vocab_size + 31) / 32;
  check_ids(params.allowed_token_ids, vocab_size, "allowed_token_ids",
            "allowed_token_ids contains out-of-vocab token id!");
  if (!params.allowed_token_ids.empty()) {
    r->allowed_.assign(r->words_, 0u);
    for (int32_t t : params.allowed_token_ids) r->allowed_[size_t(t) >> 5] |= 1u << (t & 31);
  }
  for (const auto& w : params.bad_words_token_ids)
    check_ids(w, vocab_size, "bad_words", "bad_words: a word's token ids are outside the vocabulary");
  r->bad_words_ = params.bad_words_token_ids;  // shared with the request's other choices
  return r;
}

void TokenRestrictions::apply(uint32_t* mask, const std::vector<int32_t>& token_ids, int64_t num_prompt_tokens) const {
  if (!allowed_.empty())
    for (size_t i = 0; i < words_; ++i) mask[i] &= allowed_[i];
  const size_t generated = token_ids.size() - size_t(num_prompt_tokens);
  for (const auto& w : bad_words_) {
    if (w.empty()) continue;
    const size_t prefix = w.size() - 1;
    if (prefix > generated) continue;  // vLLM looks at the generated tokens only
    if (!std::equal(w.begin(), w.end() - 1, token_ids.end() - std::ptrdiff_t(prefix))) continue;
    const int32_t t = w.back();
    mask[size_t(t) >> 5] &= ~(1u << (t & 31));
  }
}

}  // namespace nanovllm
