#include "nanovllm/engine/scheduler.h"

#include <algorithm>

#include "nanovllm/utils/error.h"

namespace nanovllm {

Scheduler::Scheduler(const EngineConfig& cfg, BlockManager& bm, std::vector<int32_t> eos_token_ids)
    : max_num_seqs_(cfg.max_num_seqs), max_num_batched_tokens_(cfg.max_num_batched_tokens),
      max_model_len_(cfg.max_model_len), bm_(bm), eos_(std::move(eos_token_ids)) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SequenceStatus::Waiting;
  waiting_.push_back(seq);
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch;
  // Prefill.
  int64_t num_batched = 0;
  while (!waiting_.empty() && int64_t(batch.seqs.size()) < max_num_seqs_) {
    Sequence* seq = waiting_.front();
    const int64_t remaining = max_num_batched_tokens_ - num_batched;
    if (remaining <= 0) break;
    int64_t num_new;
    if (seq->block_table.empty()) {
      int64_t hits = bm_.can_allocate(*seq);
      if (hits < 0) break;
      num_new = seq->num_tokens() - hits * bm_.block_size();
    } else {  // a chunked prefill in progress
      num_new = seq->num_tokens() - seq->num_cached_tokens;
    }
    if (num_new > remaining && !batch.seqs.empty()) break;  // only the first may be chunked
    if (seq->block_table.empty()) bm_.allocate(*seq);
    seq->num_scheduled_tokens = std::min(num_new, remaining);
    batch.seqs.push_back(seq);
    num_batched += seq->num_scheduled_tokens;
    if (seq->num_scheduled_tokens < num_new) break;  // chunked: it stays at the front of waiting
    seq->status = SequenceStatus::Running;
    waiting_.pop_front();
    running_.push_back(seq);
  }
  if (!batch.seqs.empty()) {
    batch.is_prefill = true;
    batch.num_tokens = num_batched;
    return batch;
  }
  // Decode.
  std::vector<Sequence*> scheduled;
  while (!running_.empty() && int64_t(scheduled.size()) < max_num_seqs_) {
    Sequence* seq = running_.front();
    running_.pop_front();
    bool ok = true;
    while (!bm_.can_append(*seq)) {
      if (!running_.empty()) {
        preempt(running_.back());
        running_.pop_back();
      } else {
        preempt(seq);
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    bm_.may_append(*seq);
    seq->num_scheduled_tokens = 1;
    scheduled.push_back(seq);
  }
  for (auto it = scheduled.rbegin(); it != scheduled.rend(); ++it) running_.push_front(*it);
  batch.seqs = std::move(scheduled);
  batch.is_prefill = false;
  batch.num_tokens = int64_t(batch.seqs.size());
  return batch;
}

void Scheduler::preempt(Sequence* seq) {
  seq->status = SequenceStatus::Waiting;
  bm_.deallocate(*seq);
  ++seq->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(seq);
}

void Scheduler::finish(Sequence* seq, FinishReason why) {
  seq->status = SequenceStatus::Finished;
  seq->finish_reason = why;
  bm_.deallocate(*seq);
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
  it = std::find(waiting_.begin(), waiting_.end(), seq);
  if (it != waiting_.end()) waiting_.erase(it);
}

std::vector<Sequence*> Scheduler::postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& token_ids) {
  if (token_ids.size() != batch.seqs.size())
    throw Error("scheduler: " + std::to_string(token_ids.size()) + " tokens for a batch of " +
                std::to_string(batch.seqs.size()));
  std::vector<Sequence*> finished;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* seq = batch.seqs[i];
    seq->num_cached_tokens += seq->num_scheduled_tokens;
    seq->num_scheduled_tokens = 0;
    bm_.hash_blocks(*seq);
    if (seq->num_cached_tokens < seq->num_tokens()) continue;  // a prefill chunk: no token yet
    const int32_t tok = token_ids[i];
    seq->token_ids.push_back(tok);
    const auto& p = seq->params;
    bool stop = (!p.ignore_eos && std::find(eos_.begin(), eos_.end(), tok) != eos_.end()) ||
                std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), tok) != p.stop_token_ids.end();
    if (stop) {
      finish(seq, FinishReason::Stop);
    } else if (seq->num_completion_tokens() >= p.max_tokens || seq->num_tokens() >= max_model_len_) {
      finish(seq, FinishReason::Length);
    } else {
      continue;
    }
    finished.push_back(seq);
  }
  return finished;
}

bool Scheduler::abort(int64_t seq_id) {
  for (auto* q : {&waiting_, &running_})
    for (Sequence* s : *q)
      if (s->id == seq_id) {
        finish(s, FinishReason::Abort);
        return true;
      }
  return false;
}

}  // namespace nanovllm
