// vLLM's allowed_token_ids and bad_words as a sequence's token mask: the allowed set is fixed
// for the request; a bad word's last token is banned whenever the tokens before it are the last
// ones generated (a one-token word always). The mask goes the way of structured outputs' masks
// (SamplingRow::allowed, filled by GrammarMasks), combined with the grammar's when both are set.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nanovllm/config/sampling_params.h"

namespace nanovllm {

class TokenRestrictions {
 public:
  // Null when `params` restricts nothing. Throws InvalidRequest for an id outside [0, vocab_size).
  static std::unique_ptr<TokenRestrictions> of(const SamplingParams& params, int64_t vocab_size);

  size_t mask_words() const { return words_; }
  // Narrows `mask` (mask_words() words, bit t % 32 of word t / 32: token t allowed) given the
  // sequence's completion tokens so far.
  void apply(uint32_t* mask, const std::vector<int32_t>& token_ids, int64_t num_prompt_tokens) const;

 private:
  size_t words_ = 0;
  std::vector<uint32_t> allowed_;  // empty: every token
  Shared<std::vector<std::vector<int32_t>>> bad_words_;
};

}  // namespace nanovllm
