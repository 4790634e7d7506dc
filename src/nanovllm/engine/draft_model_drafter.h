// Speculative decoding with a draft model (vLLM's "draft_model" method): a second, smaller model of
// the same vocabulary proposes k tokens per row by decoding them itself.
//
// KV cache: the draft has its own (its ModelRunner's) and its own BlockManager, prefix caching off.
// Not a block table kept in step with the target's: the draft's sequences run ahead of the
// target's by its unverified drafts and behind it while catching up, the two caches' blocks differ
// in size (other layers and heads), and a sequence's draft state can be dropped and rebuilt at any
// time (preemption, no free block) without touching the target's. Each sequence has a shadow
// Sequence (same id, prompt length, sampling settings and seed as the request) whose tokens are
// the verified tokens followed by the draft's own proposals, and whose num_cached_tokens counts the
// positions with draft K/V.
//
// propose(): for each row, the shadow's tokens are cut back to the longest common prefix with the
// verified tokens (drafts the target rejected: their K/V is rolled back, BlockManager::trim), then
//  1. one batched pass computes every row's uncomputed verified tokens (the target's token, and
//     the last draft when every draft stood: its K/V was never computed; up to k + 1 tokens where
//     the drafts were not the draft's own, as in bench's controlled mode; a prompt's tail when
//     observe_prefill did not see it) and samples the first draft from the last position. Its
//     rows of up to k + 1 tokens are catch-up rows (ScheduledBatch::num_catch_up_rows): each
//     position a decode row of its own, as the target's verify rows, so that the pass runs
//     through the draft's CUDA graphs and decode kernels, the last positions' logits gathered for
//     the sampler (a prefill pass, eager, only with a prompt's tail or past the largest graph);
//  2. k - 1 batched single-token decode passes sample the next drafts (through the draft's CUDA
//     graphs on a GPU), each reading the tokens of the pass before on the device
//     (ModelRunner::run_ahead) while those go to the host (propose() says what syncs).
// A row that finds no free block for its N + k - 1 slots gets no drafts this step (never evicts);
// one past the draft's own max_model_len (a draft may have a shorter context) gets none either.
// observe_prefill() computes prompt chunks the target just read, in the same engine step: the
// draft's prefill is chunked alongside the target's.
//
// Memory and device: the draft's ModelRunner is loaded and warmed up before the target sizes its KV
// cache, which pays for both (SharedKvBudget, llm_engine.cpp). On a GPU the draft has a backend of
// its own (its stream, step arena, cuBLASLt handle, pinned staging), sharing nothing with the
// target's but the device; the host orders the two streams: the target's step ends with its tokens
// on the host (speculation turns async scheduling off) before propose() runs, and propose() waits
// for its last pass before the verify step launches. observe_prefill()'s pass is not waited for: it
// touches only the draft's cache and arena, which only the draft's stream (in order) touches next.
// Under tensor parallelism the draft runs on rank 0 only, un-sharded (its runner has no TpGroup),
// and only rank 0's budget pays for it (llm_engine.cpp).
//
// Sampling: the draft samples with the request's settings and seed, at the same positions as the
// target (ModelRunner::run on the shadow), so its draws share the target sampler's noise
// (backends/sampling_noise.h: a function of seed, position and token). Verification keeps a draft
// iff it equals the target's own token there (spec/verification.h, accepted_prefix): outputs are
// those of non-speculative decoding with the same seed, greedy or sampled, hence follow the target
// distribution exactly; the shared noise (a Gumbel-max coupling of draft and target) is what makes
// sampled drafts likely to stand when the two distributions are close.
#pragma once
#include <memory>
#include <unordered_map>

#include "nanovllm/engine/block_manager.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/spec/drafter.h"

namespace nanovllm {

class DraftModelDrafter : public Drafter {
 public:
  // runner: the draft model and its KV cache (runner->num_kv_blocks() blocks of block_size).
  DraftModelDrafter(std::unique_ptr<ModelRunner> runner, int64_t num_speculative_tokens, int64_t block_size);
  ~DraftModelDrafter() override;
  void propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) override;
  void observe_prefill(std::span<const DraftQuery> queries) override;
  void release(int64_t seq_id) override;
  int64_t num_speculative_tokens() const override { return k_; }

  const BlockManager& block_manager() const { return bm_; }
  int64_t num_sequences() const { return int64_t(shadows_.size()); }
  // Passes that read the pass before's tokens on the device (ModelRunner::run_ahead), so far.
  int64_t num_passes_ahead() const { return passes_ahead_; }
  ModelRunner& runner() { return *runner_; }
  const ModelRunner& runner() const { return *runner_; }

 private:
  // The shadow of q's sequence, cut back to its longest common prefix with q.tokens and holding
  // those tokens (K/V kept for the common computed prefix); null when it cannot hold `slots` slots.
  Sequence* sync(const DraftQuery& q, int64_t slots);
  // One pass's tokens, a token per shadow: on the device (until waited for) where the pass could
  // sample there, else already on the host.
  struct Pass {
    Backend::SampledTokens tokens;
    bool on_device = false;
  };
  // Launches one batch of shadows (their num_scheduled_tokens set, counted as cached after).
  Pass launch(const std::vector<Sequence*>& seqs);
  // The batch of shadows: a row of 0 or 1 scheduled tokens is a decode (0: a pass ahead), one of
  // 2..k + 1 a catch-up row (decode rows, a CUDA graph: ModelRunner::prepare), a longer one a
  // prompt chunk (the pass runs as a prefill, as it does past max_catch_up_decode_rows rows).
  ScheduledBatch batch_of(const std::vector<Sequence*>& seqs) const;

  std::unique_ptr<ModelRunner> runner_;
  int64_t k_;
  BlockManager bm_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> shadows_;  // by sequence id
  int64_t passes_ahead_ = 0;
};

// The number of K/V elements one KV block of block_size tokens holds for a model (both planes,
// every layer): what a draft model adds to each block of the target's budget.
int64_t kv_elements_per_block(const ModelConfig& mcfg, int64_t block_size);

}  // namespace nanovllm
