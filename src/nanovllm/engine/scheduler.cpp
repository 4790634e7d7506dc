#include "nanovllm/engine/scheduler.h"

#include <algorithm>

#include "nanovllm/spec/verification.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

Scheduler::Scheduler(const EngineConfig& cfg, BlockManager& bm, std::vector<int32_t> eos_token_ids,
                     const StepCostModel::Vec& cost_prior)
    : max_num_seqs_(cfg.max_num_seqs), max_num_batched_tokens_(cfg.max_num_batched_tokens),
      max_model_len_(cfg.max_model_len), max_partial_(cfg.max_num_partial_prefills),
      max_long_partial_(cfg.max_long_partial_prefills), long_threshold_(effective_long_prefill_threshold(cfg)),
      mixed_(cfg.enable_chunked_prefill), priority_(cfg.scheduling_policy == SchedulingPolicy::Priority),
      target_s_(std::max(0.0, cfg.target_itl_ms) / 1e3), cost_(cost_prior), bm_(bm), eos_(std::move(eos_token_ids)) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SequenceStatus::Waiting;
  enqueue(waiting_, seq, false);
}

void Scheduler::enqueue(std::deque<Sequence*>& q, Sequence* seq, bool preempted) {
  if (!priority_) {
    if (preempted)
      q.push_front(seq);
    else
      q.push_back(seq);
    return;
  }
  auto key = [](const Sequence* s) { return std::pair(s->params.priority, s->id); };
  q.insert(
      std::upper_bound(q.begin(), q.end(), seq, [&](const Sequence* a, const Sequence* b) { return key(a) < key(b); }),
      seq);
}

void Scheduler::observe_step(const ScheduledBatch& batch, double seconds) {
  if (target_s_ > 0 && !batch.seqs.empty()) cost_.observe(batch.shape, seconds);
}

namespace {

// Puts seq into the batch for n tokens.
void take(ScheduledBatch& batch, Sequence* seq, int64_t n) {
  seq->num_scheduled_tokens = n;
  if (!seq->is_verify_step()) seq->draft_ids.clear();  // drafts go only with their verify step
  batch.seqs.push_back(seq);
  batch.num_tokens += n;
  if (seq->is_decode_step()) {
    ++batch.num_decodes;
    batch.shape.add_decode(seq->num_tokens());
  } else if (seq->is_verify_step()) {  // a short chunk after the cached context
    ++batch.num_verify_rows;
    batch.num_draft_tokens += n - 1;
    batch.shape.add_chunk(n, seq->num_cached_tokens);
  } else {
    batch.num_prefill_tokens += n;
    batch.shape.add_chunk(n, seq->num_cached_tokens);
  }
}

}  // namespace

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch = mixed_ ? schedule_mixed() : schedule_prefill_first();
  batch.is_prefill = batch.num_prefill_tokens > 0 || batch.num_verify_rows > 0;
  return batch;
}

bool Scheduler::schedule_decode(ScheduledBatch& batch, Sequence* seq) {
  // After the step: up to k + 1 new tokens, within max_tokens and max_model_len.
  const int64_t k =
      std::min({int64_t(seq->draft_ids.size()), max_num_batched_tokens_ - batch.num_tokens - 1,
                seq->params.max_tokens - seq->num_completion_tokens() - 1, max_model_len_ - seq->num_tokens() - 1});
  if (k > 0 && bm_.can_append(*seq, k)) {
    bm_.may_append(*seq, k);
    seq->draft_ids.resize(size_t(k));
    take(batch, seq, 1 + k);
    return true;
  }
  seq->draft_ids.clear();
  if (!reserve_decode_slot(seq)) return false;
  take(batch, seq, 1);
  return true;
}

bool Scheduler::reserve_decode_slot(Sequence* seq) {
  while (!bm_.can_append(*seq)) {
    Sequence* victim = running_.back();
    running_.pop_back();
    preempt(victim);
    if (victim == seq) return false;
  }
  bm_.may_append(*seq);
  return true;
}

int64_t Scheduler::prompt_chunk(const ScheduledBatch& batch, int64_t start, int64_t left) const {
  int64_t n = std::min(left, max_num_batched_tokens_ - batch.num_tokens);
  if (long_threshold_ > 0) n = std::min(n, long_threshold_);
  if (n <= 0 || target_s_ <= 0 || batch.num_decodes == 0) return std::max<int64_t>(n, 0);
  const int64_t fit = cost_.max_chunk(batch.shape, start, target_s_, n);
  return fit == 0 && batch.num_prefill_tokens == 0 ? std::min(n, kMinPrefillChunk) : fit;
}

ScheduledBatch Scheduler::schedule_mixed() {
  ScheduledBatch batch;
  // 1. Decodes, oldest first. Preemption takes the newest, which are not scheduled yet (index >= i).
  for (size_t i = 0; i < running_.size() && int64_t(batch.seqs.size()) < max_num_seqs_;) {
    Sequence* seq = running_[i];
    if (seq->num_tokens() - seq->num_cached_tokens > 1) {  // a prompt still being read: step 2
      ++i;
      continue;
    }
    if (batch.num_tokens >= max_num_batched_tokens_) break;  // only with a budget below max_num_seqs
    if (!schedule_decode(batch, seq)) continue;              // seq was the newest and had to go
    ++i;
  }
  // 2. The next chunk of each prompt in progress (its blocks are held since admission). Those
  // left part-way after this step count against the partial-prefill limits.
  int64_t partial = 0, long_partial = 0;
  auto left_partway = [&](const Sequence& s) {
    ++partial;
    long_partial += is_long(s);
  };
  for (Sequence* seq : running_) {
    const int64_t left = seq->num_tokens() - seq->num_cached_tokens;
    if (left <= 1) continue;
    const int64_t n =
        int64_t(batch.seqs.size()) < max_num_seqs_ ? prompt_chunk(batch, seq->num_cached_tokens, left) : 0;
    if (n > 0) take(batch, seq, n);
    if (n < left) left_partway(*seq);
  }
  // 3. Admissions in queue order; the ones cut by the budget are partial. A long prompt that may
  // not start is passed over (shorter ones may go ahead); anything else that does not fit ends them.
  for (size_t i = 0; i < waiting_.size() && int64_t(running_.size()) < max_num_seqs_ &&
                     int64_t(batch.seqs.size()) < max_num_seqs_ && batch.num_tokens < max_num_batched_tokens_;) {
    Sequence* seq = waiting_[i];
    const int64_t hits = bm_.can_allocate(*seq);
    if (hits < 0) break;
    const int64_t start = hits * bm_.block_size();
    const int64_t n = prompt_chunk(batch, start, seq->num_tokens() - start);
    if (n <= 0) break;
    if (n < seq->num_tokens() - start) {  // it would be left part-way
      if (partial >= max_partial_) break;
      if (is_long(*seq) && long_partial >= max_long_partial_) {
        ++i;
        continue;
      }
    }
    bm_.allocate(*seq);  // sets num_cached_tokens to the prefix-cache hits
    waiting_.erase(waiting_.begin() + std::ptrdiff_t(i));
    seq->status = SequenceStatus::Running;
    enqueue(running_, seq, false);
    const int64_t left = seq->num_tokens() - seq->num_cached_tokens;
    take(batch, seq, std::min(n, left));
    if (n < left) left_partway(*seq);
  }
  return batch;
}

ScheduledBatch Scheduler::schedule_prefill_first() {
  ScheduledBatch batch;
  // Prefill.
  while (!waiting_.empty() && int64_t(batch.seqs.size()) < max_num_seqs_) {
    Sequence* seq = waiting_.front();
    const int64_t remaining = max_num_batched_tokens_ - batch.num_tokens;
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
    if (seq->block_table.empty()) {
      bm_.allocate(*seq);  // granule hits may cache more than the whole blocks counted above
      num_new = seq->num_tokens() - seq->num_cached_tokens;
    }
    take(batch, seq, std::min(num_new, remaining));
    if (seq->num_scheduled_tokens < num_new) break;  // chunked: it stays at the front of waiting
    seq->status = SequenceStatus::Running;
    waiting_.pop_front();
    enqueue(running_, seq, false);
  }
  if (!batch.seqs.empty()) return batch;
  // Decode, oldest first; preemption takes the newest, which are not scheduled yet (index >= i).
  for (size_t i = 0; i < running_.size() && int64_t(batch.seqs.size()) < max_num_seqs_;) {
    if (!schedule_decode(batch, running_[i])) continue;  // it was the newest and had to go
    ++i;
  }
  return batch;
}

void Scheduler::preempt(Sequence* seq) {
  seq->status = SequenceStatus::Waiting;
  seq->draft_ids.clear();
  bm_.deallocate(*seq);
  ++seq->num_preemptions;
  ++num_preemptions_;
  enqueue(waiting_, seq, true);
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

bool Scheduler::append_token(Sequence* seq, int32_t tok) {
  seq->token_ids.push_back(tok);
  if (seq->grammar && !advance_grammar(*seq->grammar, tok)) {  // only if a backend ignored the mask
    finish(seq, FinishReason::Abort);
    return true;
  }
  const auto& p = seq->params;
  // Before min_tokens the sampler masks the stop ids; a stop is never taken there (as vLLM).
  const bool stop = seq->num_completion_tokens() >= p.min_tokens &&
                    ((!p.ignore_eos && std::find(eos_.begin(), eos_.end(), tok) != eos_.end()) ||
                     std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), tok) != p.stop_token_ids.end());
  if (stop) {
    finish(seq, FinishReason::Stop);
  } else if (seq->num_completion_tokens() >= p.max_tokens || seq->num_tokens() >= max_model_len_) {
    finish(seq, FinishReason::Length);
  } else {
    return false;
  }
  return true;
}

std::vector<Sequence*> Scheduler::postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& token_ids,
                                              std::vector<int64_t>* emitted) {
  size_t rows = 0;
  for (const Sequence* s : batch.seqs) rows += size_t(s->num_sampled_rows());
  if (token_ids.size() != rows)
    throw Error("scheduler: " + std::to_string(token_ids.size()) + " tokens for a batch of " + std::to_string(rows) +
                " sampled rows (" + std::to_string(batch.seqs.size()) + " sequences)");
  if (emitted) emitted->assign(batch.seqs.size(), 0);
  std::vector<Sequence*> finished;
  size_t off = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* seq = batch.seqs[i];
    const std::vector<int32_t> drafts = std::move(seq->draft_ids);
    seq->draft_ids.clear();
    const std::span<const int32_t> targets(token_ids.data() + off, drafts.size() + 1);
    off += drafts.size() + 1;
    const int64_t scheduled = seq->num_scheduled_tokens;
    seq->num_scheduled_tokens = 0;
    if (seq->num_cached_tokens + scheduled < seq->num_tokens()) {  // a prefill chunk: no token yet
      seq->num_cached_tokens += scheduled;
      bm_.hash_blocks(*seq);
      continue;
    }
    const int64_t a = accepted_prefix(drafts, targets);
    if (!drafts.empty()) {
      ++spec_.num_drafts;
      spec_.num_draft_tokens += int64_t(drafts.size());
      spec_.num_accepted_tokens += a;
      spec_.num_rejections += a < int64_t(drafts.size());
      if (spec_.accepted_per_pos.size() < drafts.size()) spec_.accepted_per_pos.resize(drafts.size(), 0);
      for (int64_t j = 0; j < a; ++j) ++spec_.accepted_per_pos[size_t(j)];
      seq->draft_backoff.observe(a, int64_t(drafts.size()));
    }
    // t_0..t_a, up to the first stop. Before each, the slots of every token so far hold computed
    // K/V: the last token, then the drafts that stood (equal to the targets appended before). The
    // blocks they fill are sealed before a stop frees them (prefix caching keeps them).
    int64_t n = 0;
    for (bool done = false; n <= a && !done;) {
      const int32_t tok = targets[size_t(n++)];
      seq->num_cached_tokens = seq->num_tokens();
      bm_.hash_blocks(*seq);
      done = append_token(seq, tok);
    }
    if (emitted) (*emitted)[i] = n;
    if (seq->status == SequenceStatus::Finished) {
      finished.push_back(seq);
      continue;
    }
    if (!drafts.empty()) bm_.trim(*seq, seq->num_cached_tokens);  // the rejected drafts' slots
  }
  return finished;
}

bool Scheduler::reserve_ahead(const ScheduledBatch& batch) {
  if (!waiting_.empty() || running_.size() != batch.seqs.size() || batch.num_decodes != int64_t(batch.seqs.size()))
    return false;
  int64_t blocks = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const Sequence* s = batch.seqs[i];
    if (running_[i] != s || !s->is_decode_step()) return false;
    // After the coming token: num_tokens() + 1 tokens, num_completion_tokens() + 1 of them sampled.
    if (s->num_completion_tokens() + 1 >= s->params.max_tokens || s->num_tokens() + 1 >= max_model_len_) return false;
    blocks += bm_.blocks_to_append(*s, 1);
  }
  if (blocks > bm_.num_free_blocks()) return false;
  for (Sequence* s : batch.seqs) bm_.may_append(*s, 1);
  return true;
}

ScheduledBatch Scheduler::resume_ahead(const std::vector<Sequence*>& seqs) {
  ScheduledBatch batch;
  for (Sequence* s : seqs) {
    if (s->status != SequenceStatus::Running || s->num_cached_tokens + 1 != s->num_tokens())
      throw Error("scheduler: sequence " + std::to_string(s->id) + " cannot resume a step ahead");
    take(batch, s, 1);
  }
  return batch;
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
