// Speculative decoding with an EAGLE-3 head (vLLM's "eagle3" method; Li et al., "EAGLE-3", 2025):
// a one-layer draft head (models/eagle3_head.h) that reads the target's own hidden states.
//
// Target side: with method eagle3 the target model copies the residual streams entering three of
// its layers (low, mid, high) into a static buffer on every forward (CausalLM::capture_aux_hidden,
// set before the warm-up and the CUDA graphs, which replay the copies), and the model runner
// records where each sequence's rows of the last step lie (ModelRunner::last_step_rows).
//
// Draft side, per sequence: the head's own KV cache (one layer, its own BlockManager, prefix
// caching off) holds positions base.. of the sequence; the head's input at position p is the
// target's fused hidden state of p and the embedding of token p + 1, and its output there predicts
// token p + 2. A shadow Sequence keeps the block table: its tokens are t[base + 1..] then drafts,
// its num_cached_tokens the positions computed from the target's hidden states (`fed`). Each step:
//  1. catch-up: one batched pass over the positions the target verified since (the accepted drafts'
//     and the step's first position; a prompt chunk's), fused by fc from the step's rows; its last
//     row's logits give the first draft;
//  2. k - 1 single-token passes feeding back the head's own prenorm hidden state (chain drafting,
//     no tree).
// Drafted positions' K/V are always rolled back (the next catch-up recomputes them from the
// target's states, as vLLM does). A prompt chunk's last position waits in a carry row (the token
// after it is not known yet). Where the target's rows do not continue the head's (a prefix-cache
// hit, a step that captured nothing, a missed step), the sequence restarts at the step's first
// position: drafts then see less context, outputs stay exact. No free block: no drafts this step.
//
// Sampling as the draft-model drafter (draft_model_drafter.h): the request's temperature, top-k/p,
// min-p and seed at the target's positions (greedy rows in the head's vocabulary, mapped by d2t;
// sampled rows over the target's vocabulary, -inf outside the head's, so the noise is the
// target's). Verification keeps drafts equal to the target's tokens: outputs are exact.
//
// Tensor parallelism: the head runs un-sharded on rank 0 (its target runner's backend); only rank
// 0's target captures the hidden states, which are whole there (each layer's all-reduce completes
// the residual stream on every rank). A head without embed_tokens reads the target's whole table,
// loaded on rank 0 from the target's checkpoint where its runner holds a shard.
#pragma once
#include <memory>
#include <unordered_map>

#include "nanovllm/engine/block_manager.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/models/eagle3_head.h"
#include "nanovllm/spec/drafter.h"

namespace nanovllm {

// The head's config for an engine config with method eagle3: its directory's config.json, or with
// --load-format dummy and no head directory, a head shaped for the target.
Eagle3Config eagle3_config_for(const EngineConfig& cfg, const ModelConfig& target);
// Rows per layer of the target's hidden-state buffer: the largest step the scheduler makes.
int64_t eagle3_aux_rows(const EngineConfig& cfg);
// K/V elements of one block of the head's cache (one layer), paid from the target's budget.
int64_t eagle3_kv_elements_per_block(const Eagle3Config& head, int64_t block_size);

class Eagle3Drafter : public Drafter {
 public:
  // target: the engine's runner (its backend runs the head; it outlives the drafter).
  // kv_blocks: blocks of the head's cache (cfg.block_size slots each).
  Eagle3Drafter(ModelRunner& target, const ModelConfig& target_cfg, const EngineConfig& cfg, int64_t kv_blocks);
  ~Eagle3Drafter() override;
  void propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) override;
  void observe_prefill(std::span<const DraftQuery> queries) override;
  void release(int64_t seq_id) override;
  int64_t num_speculative_tokens() const override { return k_; }

  const BlockManager& block_manager() const { return bm_; }
  int64_t num_sequences() const { return int64_t(rows_.size()); }
  const Eagle3Head& head() const { return *head_; }

 private:
  struct Row {
    std::unique_ptr<Sequence> shadow;
    int64_t base = 0;    // the sequence position of shadow index 0
    int64_t fed = 0;     // shadow positions computed from the target's hidden states
    int64_t carry = -1;  // carry_ slot holding position base + fed's fused state; -1: none
  };
  struct Pass;  // one catch-up pass being built (eagle3_drafter.cpp)
  // Catch-up of q's sequence (propose: drafting = true) into `pass`; false: nothing to run for it.
  bool plan(const DraftQuery& q, bool drafting, Pass& pass);
  void reset(Row& r);
  // The fused hidden states of a catch-up pass's rows ([T, H]); writes its carry rows. In a step.
  Tensor catch_up_input(const Pass& pass);
  // Runs the head over shadows (num_scheduled_tokens set; positions shifted by their rows' bases)
  // with hidden [T, H] in the current step; the last row's prenorm state of each goes to
  // next_hidden_; returns the last rows' logits [B, Vd].
  Tensor run(const std::vector<Row*>& rows, const Tensor& hidden);
  // One token per row of logits (draft vocabulary), sampled as queries[i] asks at positions[i];
  // target ids. Ends the step.
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<const DraftQuery*>& queries,
                              const std::vector<int64_t>& positions);

  Backend& be_;
  CausalLM& target_model_;
  ModelRunner& target_;
  std::unique_ptr<Eagle3Head> head_;
  int64_t k_, max_rows_;
  BlockManager bm_;
  Tensor kv_cache_;  // [2, blocks, block_size, Hkv, D]
  LayerKVCache kv_;
  Tensor carry_, next_hidden_;  // [max_rows, H] each (static: they outlive a step's arena)
  std::vector<int64_t> free_carries_;
  Tensor target_ids_, vocab_mask_;         // [V]: t2d (Vd where unmapped) I32; 0 / -inf over the target's ids
  bool identity_vocab_ = true;             // Vd = V and d2t maps every id to itself
  std::unordered_map<int64_t, Row> rows_;  // by sequence id
};

}  // namespace nanovllm
