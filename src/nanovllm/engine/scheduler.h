// Continuous batching (nano-vllm's Scheduler, with chunked prefill).
//  - Prefill first: take waiting sequences while max_num_seqs and max_num_batched_tokens allow;
//    only the first sequence of a batch may be chunked (prefilled in parts over several steps).
//  - Otherwise decode every running sequence, preempting from the back of the running queue
//    (recompute: its blocks are freed and it goes back to the front of waiting) when the KV pool
//    has no block for the next token.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/engine/block_manager.h"
#include "nanovllm/engine/sequence.h"

namespace nanovllm {

struct ScheduledBatch {
  std::vector<Sequence*> seqs;
  bool is_prefill = false;
  int64_t num_tokens = 0;  // tokens computed by this batch (sum of num_scheduled_tokens)
};

class Scheduler {
 public:
  Scheduler(const EngineConfig& cfg, BlockManager& bm, std::vector<int32_t> eos_token_ids);

  void add(Sequence* seq);  // not owned
  ScheduledBatch schedule();
  // Applies one step's sampled tokens (one per sequence). Returns the sequences that finished.
  std::vector<Sequence*> postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& token_ids);
  // Removes a sequence wherever it is and frees its blocks; returns false if unknown.
  bool abort(int64_t seq_id);
  bool is_finished() const { return waiting_.empty() && running_.empty(); }

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  void preempt(Sequence* seq);
  void finish(Sequence* seq, FinishReason why);

  int64_t max_num_seqs_, max_num_batched_tokens_, max_model_len_;
  BlockManager& bm_;
  std::vector<int32_t> eos_;
  std::deque<Sequence*> waiting_, running_;
  int64_t num_preemptions_ = 0;
};

}  // namespace nanovllm
