// Speculative decoding's drafters: what proposes the tokens a target model then verifies in one
// step (engine/llm_engine.h runs the loop; spec/verification.h decides which drafts stand).
// A drafter sees a sequence's tokens (prompt then output, all verified) after each step and proposes
// up to max_drafts tokens to follow them; none is a fine answer (the row then decodes normally).
// Drafters may keep per-sequence state (an index of its tokens), keyed by the sequence's id, until
// release(). Drafters: n-gram (ngram_drafter.h), acceptance-controlled (controlled_drafter.h, the
// benchmark's), a draft model (engine/draft_model_drafter.h: it runs a model, so it lives with the
// engine); they propose for a whole batch at once (a draft model runs batched passes).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nanovllm/config/sampling_params.h"
#include "nanovllm/config/speculative_config.h"

namespace nanovllm {

struct DraftQuery {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;  // the sequence's verified tokens; only ever appended to between calls
  int64_t max_drafts = 0;           // at most this many (<= num_speculative_tokens)
  // The request, for drafters that sample (a draft model): its settings, seed and prompt length.
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  int64_t num_prompt_tokens = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // out[i]: the drafts following queries[i].tokens (at most its max_drafts; may be empty).
  virtual void propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) = 0;
  // Prompt tokens the target has computed so far, for sequences still reading their prompt
  // (max_drafts 0): a drafter with its own KV cache computes them alongside, in the same steps,
  // so that its first proposal reads only the tokens after. Default: nothing to do.
  virtual void observe_prefill(std::span<const DraftQuery> /*queries*/) {}
  // Forgets a sequence's state (it finished, was aborted, was preempted); unknown ids are ignored.
  virtual void release(int64_t seq_id) = 0;
  virtual int64_t num_speculative_tokens() const = 0;
};

// The drafter of an enabled config (SpeculativeConfig::parse refused the methods we lack).
std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& cfg);

}  // namespace nanovllm
