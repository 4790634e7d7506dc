// Continuous batching (nano-vllm's Scheduler, with vLLM V1's mixed steps).
//
// A step computes at most max_num_batched_tokens tokens of at most max_num_seqs sequences. Two
// policies, chosen by EngineConfig::enable_chunked_prefill:
//
// Mixed steps (chunked prefill on, the default; as vLLM V1, and SGLang with --enable-mixed-chunk):
//  1. Decodes: every running sequence whose prompt is fully computed gets one token, oldest first.
//     When the KV pool has no block for it, the newest running sequence is preempted (recompute:
//     its blocks are freed and it goes back to the front of waiting), the sequence itself if it
//     is the newest.
//  2. Chunks: running sequences whose prompt is still being computed (admitted in an earlier step
//     and cut by the budget) get the next chunk, as much of the budget as is left.
//  3. Admissions: waiting sequences, in order, while the budget lasts, fewer than max_num_seqs run
//     and the pool holds their blocks (prefix-cache hits counted); the last one admitted may be
//     chunked. An admitted sequence is running from then on, its blocks held.
//  So a long prompt is read in budget-sized chunks between the decode tokens of the streams already
//  running: their inter-token latency is one step of at most max_num_batched_tokens tokens, never
//  the whole prompt. The budget trades that latency against the long prompt's TTFT (smaller
//  chunks read the weights more often); a chunk late in a long prompt costs more than an early one
//  (its attention spans the whole context). The batch lists the decodes first, then the chunks, so the attention of the
//  one-token rows runs on the decode kernel and the rest on the prefill kernel. Decode-only steps
//  replay CUDA graphs; a mixed step is one eager forward over all its rows. (Replaying the decode
//  graph and running the chunks as a second forward was tried and measured slower: 7.55 vs 6.98
//  ms for 128 decodes + a 512-token prompt on Qwen3-0.6B, and a worse ITL for Qwen3-8B, which
//  reads its weights twice; bench/RESULTS.md, issue 18.)
//
// The latency target (EngineConfig::target_itl_ms, on by default in `serve` on a GPU): in a mixed
// step that decodes running streams, a prompt chunk takes only the tokens that a cost model of the
// step's time (step_cost_model.h, learnt online from every step's measured time) fits within the
// target after the decodes; a step with no decodes (nobody waits on it) takes the whole token
// budget. So the streams' inter-token latency stays near the target whatever prompt arrives, and a
// long prompt is read in the largest chunks that allow it (chunks late in a long prompt are
// smaller: their attention spans more context). When the decodes alone exceed the target, the
// first prompt of the step still gets kMinPrefillChunk tokens, so prompts always progress.
// vLLM's partial prefills: at most max_num_partial_prefills prompts part-way computed, of which at
// most max_long_partial_prefills long ones (> the long threshold; a long prompt that may not
// start is passed over, so shorter ones go ahead), and a prompt takes at most the threshold's
// tokens per step.
//
// Priority (--scheduling-policy priority): waiting and running sequences are kept in the order
// (priority, arrival); admissions take the first waiting, decodes run in that order, preemption
// takes the last running (the lowest priority, newest).
//
// Prefill first (chunked prefill off: nano-vllm's policy, kept for comparison):
//  - Take waiting sequences while max_num_seqs and max_num_batched_tokens allow; only the first
//    sequence of a batch may be chunked (prefilled in parts over several steps, staying at the
//    front of waiting meanwhile).
//  - Only when no prefill was scheduled, decode every running sequence, preempting from the back
//    of the running queue as above. A prompt arriving stalls every running stream until it is read.
//
// Both compute the same tokens: a sequence's logits do not depend on what shares its step, so
// greedy outputs are identical under either policy (tests/unit/engine/test_mixed_steps.cpp, and on
// CUDA tests/gpu/test_engine_modes.cpp).
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/engine/block_manager.h"
#include "nanovllm/engine/sequence.h"
#include "nanovllm/engine/step_cost_model.h"

namespace nanovllm {

// The least prompt tokens a step with decodes takes when the decodes alone exceed the latency target.
inline constexpr int64_t kMinPrefillChunk = 256;

struct ScheduledBatch {
  std::vector<Sequence*> seqs;     // decodes and verify rows first, then prefill chunks
  bool is_prefill = false;         // some row computes more than one token: a prefill, mixed or verify step
  int64_t num_tokens = 0;          // tokens computed by this batch (sum of num_scheduled_tokens)
  int64_t num_decodes = 0;         // sequences decoding their last sampled token (Sequence::is_decode_step)
  int64_t num_prefill_tokens = 0;  // prompt tokens (and recomputed outputs after preemption)
  int64_t num_verify_rows = 0;     // sequences verifying drafts (Sequence::is_verify_step)
  int64_t num_draft_tokens = 0;    // their drafts
  StepShape shape;                 // what the step cost model reads (mixed steps)
  // A draft model's catch-up rows (draft_model_drafter.h): a few verified tokens each, sampled at
  // the last only. Like verify rows, laid out as decode rows when no row is a prompt chunk.
  int64_t num_catch_up_rows = 0;
};

// Speculative decoding's counters, cumulative (vLLM's vllm:spec_decode_* metrics).
struct SpecDecodeStats {
  int64_t num_drafts = 0;           // verify rows: a sequence's drafts verified in a step
  int64_t num_draft_tokens = 0;     // drafts verified
  int64_t num_accepted_tokens = 0;  // drafts that stood
  // Verify rows where a draft was rejected: accepted / (accepted + rejections) estimates the
  // per-token acceptance probability (the drafts after the first rejected one are never judged).
  int64_t num_rejections = 0;
  std::vector<int64_t> accepted_per_pos;  // [j]: drafts that stood at draft position j
};

class Scheduler {
 public:
  // cost_prior: the step cost model's coefficients before any step is measured (used when
  // cfg.target_itl_ms > 0).
  Scheduler(const EngineConfig& cfg, BlockManager& bm, std::vector<int32_t> eos_token_ids,
            const StepCostModel::Vec& cost_prior = StepCostModel::prior_from(1e-4, 1e-4));

  void add(Sequence* seq);  // not owned
  ScheduledBatch schedule();
  // Applies one step's sampled tokens: Sequence::num_sampled_rows() per sequence, in batch order
  // (one, or a verify row's target tokens t_0..t_k). A verify row keeps its drafts while they equal
  // the targets (spec/verification.h), appends t_0..t_a, and releases the slots of the rest
  // (BlockManager::trim). Stops (EOS, stop ids, max_tokens, max_model_len) are checked at every
  // appended token: the first ends the sequence there. emitted (if given): per sequence, how many
  // tokens it appended (0: a prompt chunk). Returns the sequences that finished.
  std::vector<Sequence*> postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& token_ids,
                                     std::vector<int64_t>* emitted = nullptr);
  // Async scheduling (llm_engine.h). reserve_ahead: `batch` was scheduled and runs, its tokens not
  // known yet; reserves the slots of the decode step after it where that step is certain to be the
  // one schedule() would make after postprocess(batch): every running sequence decodes in `batch`
  // (in running order), none is waiting, none reaches max_tokens or max_model_len with the token
  // coming, and the free blocks hold the new slots without preemption. Else reserves nothing and
  // returns false. (A sequence that stops on that token wastes its row of the step ahead.)
  bool reserve_ahead(const ScheduledBatch& batch);
  // After postprocess: the step ahead as a batch of those of its sequences still running.
  ScheduledBatch resume_ahead(const std::vector<Sequence*>& seqs);
  // Removes a sequence wherever it is and frees its blocks; returns false if unknown.
  bool abort(int64_t seq_id);
  bool is_finished() const { return waiting_.empty() && running_.empty(); }
  // A step of `batch` took `seconds` (schedule to tokens): the cost model learns from it.
  void observe_step(const ScheduledBatch& batch, double seconds);
  const StepCostModel& cost_model() const { return cost_; }
  double target_itl_s() const { return target_s_; }

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SpecDecodeStats& spec_stats() const { return spec_; }

 private:
  ScheduledBatch schedule_mixed();
  ScheduledBatch schedule_prefill_first();
  // Makes room for seq's next token, preempting the newest running sequences; false when seq
  // itself had to go.
  bool reserve_decode_slot(Sequence* seq);
  // Puts a running sequence's next decode into the batch: with its drafts (as many as the token
  // budget, max_tokens, max_model_len and the free blocks allow: drafts never preempt), else as a
  // one-token decode (reserve_decode_slot). False when seq itself was preempted.
  bool schedule_decode(ScheduledBatch& batch, Sequence* seq);
  // Appends tok to seq and checks its stops; true when seq finished (then finish() has run).
  bool append_token(Sequence* seq, int32_t tok);
  void preempt(Sequence* seq);
  void finish(Sequence* seq, FinishReason why);
  // Queues seq in policy order; fcfs: at the back, or at the front (`preempted`).
  void enqueue(std::deque<Sequence*>& q, Sequence* seq, bool preempted);
  // The prompt tokens seq may take now from `start`, at most `left`: the token budget, the long
  // threshold and, when the step decodes, the latency target.
  int64_t prompt_chunk(const ScheduledBatch& batch, int64_t start, int64_t left) const;
  bool is_long(const Sequence& seq) const { return long_threshold_ > 0 && seq.num_tokens() > long_threshold_; }

  int64_t max_num_seqs_, max_num_batched_tokens_, max_model_len_;
  int64_t max_partial_, max_long_partial_, long_threshold_;
  bool mixed_, priority_;
  double target_s_;
  StepCostModel cost_;
  BlockManager& bm_;
  std::vector<int32_t> eos_;
  std::deque<Sequence*> waiting_, running_;
  int64_t num_preemptions_ = 0;
  SpecDecodeStats spec_;
};

}  // namespace nanovllm
