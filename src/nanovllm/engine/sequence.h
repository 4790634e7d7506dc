// A request as the engine sees it (nano-vllm's Sequence): its tokens, how many of them have KV in
// the cache, how many this step computes, and its block table.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nanovllm/backends/kv_block_copy.h"
#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/config/sampling_params.h"
#include "nanovllm/engine/sequence_grammar.h"
#include "nanovllm/engine/token_restrictions.h"
#include "nanovllm/spec/draft_backoff.h"

namespace nanovllm {

enum class SequenceStatus : uint8_t { Waiting, Running, Finished };

class Sequence {
 public:
  Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params, int64_t block_size, uint64_t seed)
      : id(id), token_ids(std::move(prompt)), num_prompt_tokens(int64_t(token_ids.size())), params(std::move(params)),
        seed(seed), block_size(block_size) {}

  int64_t id;
  SequenceStatus status = SequenceStatus::Waiting;
  std::vector<int32_t> token_ids;  // prompt followed by completion
  int64_t num_prompt_tokens;
  int64_t num_cached_tokens = 0;     // tokens whose K/V are in the cache
  int64_t num_scheduled_tokens = 0;  // tokens this step computes
  int64_t num_hashed_blocks = 0;     // leading blocks sealed into the prefix cache
  std::vector<int32_t> block_table;  // block ids, block i holds tokens [i*bs, (i+1)*bs)
  // A partial prefix-cache hit (block_manager.h): the leading slots of a cached block that the
  // model runner copies into this sequence's block before its first step; the block manager holds
  // the source until then. Counted in num_cached_tokens.
  std::optional<KVBlockCopy> kv_copy;
  SamplingParams params;
  uint64_t seed;  // sampling noise = f(seed, position, vocab index)
  FinishReason finish_reason = FinishReason::None;
  int64_t num_preemptions = 0;
  int64_t block_size;
  std::vector<TokenLogprobs> logprobs;  // of each completion token, when params.logprobs is set
  // Of prompt tokens 1.. (params.prompt_logprobs), filled as the prompt's chunks are computed.
  std::vector<TokenLogprobs> prompt_logprobs;
  std::unique_ptr<SequenceGrammar> grammar;         // structured outputs: null when unconstrained
  std::unique_ptr<TokenRestrictions> restrictions;  // allowed_token_ids, bad_words: null when none
  // Speculative decoding: tokens a drafter proposed to follow token_ids (the engine proposes them
  // after each step of a decoding sequence; any change of token_ids clears them). The scheduler
  // keeps those it schedules: a verify step computes the last token then these, and samples the
  // target's token at each of their 1 + drafts positions (spec/verification.h).
  std::vector<int32_t> draft_ids;
  DraftBackoff draft_backoff;  // whether the engine asks for drafts this step (spec/draft_backoff.h)
  // Pooling (params.pooling set; models/pooling_model.h): the sum of the rows pooled so far (MEAN
  // over chunks; LAST and CLS: their one row), then the request's output once its prompt is done.
  std::vector<double> pool_sum;
  std::vector<float> pooled;
  // Rows of logits this step samples: 1, or 1 + drafts in a verify step.
  int64_t num_sampled_rows() const { return 1 + int64_t(draft_ids.size()); }
  // The next token is masked (by the grammar, the restrictions or both).
  bool masks_next() const { return (grammar && grammar->constrains_next()) || restrictions; }
  bool needs_prompt_logprobs() const {
    return params.prompt_logprobs && int64_t(prompt_logprobs.size()) < num_prompt_tokens - 1;
  }

  int64_t num_tokens() const { return int64_t(token_ids.size()); }
  int64_t num_completion_tokens() const { return num_tokens() - num_prompt_tokens; }
  int64_t num_blocks() const { return (num_tokens() + block_size - 1) / block_size; }
  bool is_finished() const { return status == SequenceStatus::Finished; }
  // This step computes just the last token, one the model sampled: a decode (else the step reads
  // prompt tokens, or recomputes outputs after a preemption).
  bool is_decode_step() const {
    return num_scheduled_tokens == 1 && num_cached_tokens + 1 == num_tokens() && num_completion_tokens() > 0;
  }
  // This step verifies drafts: the last token and its drafts, after the cached context.
  bool is_verify_step() const {
    return !draft_ids.empty() && num_scheduled_tokens == num_sampled_rows() && num_cached_tokens + 1 == num_tokens();
  }
  // Tokens of block i (the last block may be partial).
  std::span<const int32_t> block(int64_t i) const {
    int64_t b = i * block_size, e = std::min(num_tokens(), b + block_size);
    return {token_ids.data() + b, size_t(e - b)};
  }
  std::vector<int32_t> completion_token_ids() const { return {token_ids.begin() + num_prompt_tokens, token_ids.end()}; }
};

}  // namespace nanovllm
