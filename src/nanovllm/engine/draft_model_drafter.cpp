// The draft-model drafter (draft_model_drafter.h): shadow sequences in the draft's own KV cache,
// one catch-up pass then k - 1 batched decode passes per step.
#include "nanovllm/engine/draft_model_drafter.h"

#include <algorithm>

namespace nanovllm {

int64_t kv_elements_per_block(const ModelConfig& mcfg, int64_t block_size) {
  return 2 * mcfg.num_hidden_layers * block_size * mcfg.num_key_value_heads * mcfg.head_dim;
}

DraftModelDrafter::DraftModelDrafter(std::unique_ptr<ModelRunner> runner, int64_t k, int64_t block_size)
    : runner_(std::move(runner)), k_(k), bm_(runner_->num_kv_blocks(), block_size, /*enable_prefix_caching=*/false) {}

DraftModelDrafter::~DraftModelDrafter() = default;

Sequence* DraftModelDrafter::sync(const DraftQuery& q, int64_t slots) {
  const int64_t n = int64_t(q.tokens.size());
  auto& sp = shadows_[q.seq_id];
  if (!sp) {
    SamplingParams p = q.params ? *q.params : SamplingParams{};
    p.logprobs.reset();  // the draft's own logprobs are never reported
    p.prompt_logprobs.reset();
    sp = std::make_unique<Sequence>(q.seq_id, std::vector<int32_t>{}, p, bm_.block_size(), q.seed);
    sp->num_prompt_tokens = q.num_prompt_tokens;
    sp->status = SequenceStatus::Running;
  }
  Sequence& s = *sp;
  // The shadow's tokens: verified ones (a prefix of q.tokens, which only grow), then its drafts.
  const int64_t m = std::min(s.num_tokens(), n);
  int64_t common = 0;
  while (common < m && s.token_ids[size_t(common)] == q.tokens[size_t(common)]) ++common;
  s.token_ids.assign(q.tokens.begin(), q.tokens.end());
  s.num_cached_tokens = std::min(s.num_cached_tokens, common);
  bm_.trim(s, s.num_cached_tokens);  // rejected drafts' K/V
  if (!bm_.can_append(s, slots - n)) return nullptr;
  bm_.may_append(s, slots - n);
  return &s;
}

ScheduledBatch DraftModelDrafter::batch_of(const std::vector<Sequence*>& seqs) const {
  ScheduledBatch b;
  int64_t catch_up_tokens = 0;
  for (Sequence* s : seqs) {
    const int64_t n = s->num_scheduled_tokens;
    b.seqs.push_back(s);
    b.num_tokens += std::max<int64_t>(n, 1);
    if (n <= 1) {  // a decode, or a pass ahead (its token on the device)
      ++b.num_decodes;
    } else if (n <= k_ + 1) {  // the verified tokens of one step: a catch-up row
      ++b.num_catch_up_rows;
      catch_up_tokens += n;
    } else {  // a prompt's tail (the target read it without observe_prefill), after preemption say
      b.num_prefill_tokens += n;
    }
  }
  // A decode row per position (ModelRunner::prepare) while they fit the largest CUDA graph.
  if (b.num_tokens > runner_->max_catch_up_decode_rows()) {
    b.num_prefill_tokens += catch_up_tokens;
    b.num_catch_up_rows = 0;
  }
  b.is_prefill = b.num_catch_up_rows > 0 || b.num_prefill_tokens > 0;
  return b;
}

DraftModelDrafter::Pass DraftModelDrafter::launch(const std::vector<Sequence*>& seqs) {
  const ScheduledBatch b = batch_of(seqs);
  Pass p;
  p.on_device = runner_->can_sample_on_device(b);
  if (p.on_device)
    p.tokens = runner_->run_to_device(b);  // no host sync: the tokens stay on the device
  else
    p.tokens.host = runner_->run(b);  // penalties and other logits processing read the tokens on the host
  for (Sequence* s : seqs) {
    s->num_cached_tokens += s->num_scheduled_tokens;
    s->num_scheduled_tokens = 0;
  }
  return p;
}

void DraftModelDrafter::observe_prefill(std::span<const DraftQuery> queries) {
  std::vector<Sequence*> rows;
  for (const DraftQuery& q : queries) {
    const int64_t n = int64_t(q.tokens.size());
    Sequence* s = n > 0 && n <= runner_->max_model_len() ? sync(q, n) : nullptr;
    if (!s || s->num_cached_tokens >= n) continue;
    s->num_scheduled_tokens = n - s->num_cached_tokens;
    rows.push_back(s);
  }
  // The sampled tokens of prompt chunks are not wanted: never waited for (on a GPU the pass runs
  // on while the engine goes on; the draft's next sampling orders after it on its stream).
  if (!rows.empty()) launch(rows);
}

// Host syncs: one per pass (k per step), but only the last leaves the device idle. While pass i's
// tokens are on their way to the host, pass i + 1 (a decode through the draft's CUDA graph) is
// already queued and reads them on the device (ModelRunner::run_ahead), as async scheduling does.
// The host work of a pass (inputs, graph replay) overlaps the device's work of the pass before.
// Passes run synchronously where a row processes logits (penalties) or the rows part ways (a row
// wants fewer drafts than another: the batch shrinks, and its tokens must be reordered on the host).
void DraftModelDrafter::propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) {
  out.assign(queries.size(), {});
  std::vector<Sequence*> rows;
  std::vector<size_t> of;
  std::vector<int64_t> want;
  for (size_t i = 0; i < queries.size(); ++i) {
    const DraftQuery& q = queries[i];
    // Within the draft's own length too (it may be shorter than the target's).
    const int64_t n = int64_t(q.tokens.size()), kk = std::min({q.max_drafts, k_, runner_->max_model_len() - n + 1});
    if (kk <= 0 || n == 0) continue;
    // Slots for the verified tokens and every draft but the last (whose K/V is never computed).
    Sequence* s = sync(q, n + kk - 1);
    if (!s) continue;
    s->num_cached_tokens = std::min(s->num_cached_tokens, n - 1);  // the last position's logits are needed
    s->num_scheduled_tokens = n - s->num_cached_tokens;
    rows.push_back(s);
    of.push_back(i);
    want.push_back(kk);
  }
  if (rows.empty()) return;
  // Pass 1 samples each row's first draft after its verified tokens; passes 2..k decode one each.
  Pass pending = launch(rows);
  while (true) {
    bool all_go_on = pending.on_device;
    for (size_t j = 0; j < rows.size() && all_go_on; ++j) all_go_on = int64_t(out[of[j]].size()) + 1 < want[j];
    Pass ahead{{}, true};
    if (all_go_on) {  // launched before the wait below
      ahead.tokens = runner_->run_ahead(batch_of(rows), pending.tokens);
      ++passes_ahead_;
    }
    const std::vector<int32_t> tokens = runner_->wait(pending.tokens);
    for (size_t j = 0; j < rows.size(); ++j) {
      rows[j]->token_ids.push_back(tokens[j]);
      out[of[j]].push_back(tokens[j]);
    }
    if (all_go_on) {  // the pass ahead computed each appended token's K/V
      for (Sequence* s : rows) s->num_cached_tokens = s->num_tokens();
      pending = std::move(ahead);
      continue;
    }
    std::vector<Sequence*> next;
    std::vector<size_t> next_of;
    std::vector<int64_t> next_want;
    for (size_t j = 0; j < rows.size(); ++j) {
      if (int64_t(out[of[j]].size()) == want[j]) continue;
      rows[j]->num_scheduled_tokens = 1;
      next.push_back(rows[j]);
      next_of.push_back(of[j]);
      next_want.push_back(want[j]);
    }
    rows = std::move(next);
    of = std::move(next_of);
    want = std::move(next_want);
    if (rows.empty()) break;
    pending = launch(rows);
  }
}

void DraftModelDrafter::release(int64_t seq_id) {
  auto it = shadows_.find(seq_id);
  if (it == shadows_.end()) return;
  bm_.deallocate(*it->second);
  shadows_.erase(it);
}

}  // namespace nanovllm
