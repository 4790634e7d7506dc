// The EAGLE-3 drafter (eagle3_drafter.h): catch-up from the target's hidden states, then chain
// drafting with the head's own.
#include "nanovllm/engine/eagle3_drafter.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "nanovllm/config/hf_hub.h"
#include "nanovllm/models/weights.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

namespace {

// The head's directory ("" with --load-format dummy and no directory: a head shaped for the target).
std::string head_dir(const EngineConfig& cfg) {
  const std::string& m = cfg.speculative_config.model;
  std::error_code ec;
  if (m.empty() || (cfg.load_dummy && !std::filesystem::is_directory(m, ec))) return "";
  EngineConfig d = cfg;
  d.model = m;
  d.model_dir.clear();
  d.speculative_config = {};
  settle_model_dir(d);  // a Hugging Face id: its snapshot
  return d.model_path();
}

// The target's embedding table whole ([V, H]) on `be`, for a head without its own when the target
// holds a tensor-parallel shard of it (rank 0: V * H weights more, outside the KV budget as the
// head's own weights). From the target's checkpoint (the Llama family's name: EAGLE-3 targets are
// Llama-family decoders, CausalLM::capture_aux_hidden), or its dummy values, which a shard holds
// exactly a slice of (load_dummy_weights).
Tensor whole_target_embedding(const EngineConfig& cfg, const ModelConfig& target, Backend& be) {
  Tensor table = be.empty({target.vocab_size, target.hidden_size}, be.weight_dtype());
  const std::vector<WeightSpec> spec = {{"model.embed_tokens.weight", {target.vocab_size, target.hidden_size}, &table}};
  if (cfg.load_dummy)
    load_dummy_weights(be, spec);
  else
    load_weights(be, SafetensorsCheckpoint(cfg.model_path()), spec);
  return table;
}

// Whether the head's checkpoint brings its own embed_tokens (dummy heads: never; they take the target's).
bool head_has_embedding(const std::string& dir) {
  return !dir.empty() && SafetensorsCheckpoint(dir).find("embed_tokens.weight") != nullptr;
}

}  // namespace

Eagle3Config eagle3_config_for(const EngineConfig& cfg, const ModelConfig& target) {
  const std::string dir = head_dir(cfg);
  if (!dir.empty()) return load_eagle3_config(dir, target);
  if (!cfg.load_dummy)
    throw UserError(
        "--speculative-config: method 'eagle3' needs 'model', the EAGLE-3 head's directory (or --load-format "
        "dummy for a random head shaped for the target)");
  return dummy_eagle3_config(target);
}

int64_t eagle3_aux_rows(const EngineConfig& cfg) {
  return std::max(cfg.max_num_batched_tokens, cfg.max_num_seqs * (cfg.speculative_config.num_speculative_tokens + 1));
}

int64_t eagle3_kv_elements_per_block(const Eagle3Config& head, int64_t block_size) {
  return 2 * block_size * head.layer.num_key_value_heads * head.layer.head_dim;
}

struct Eagle3Drafter::Pass {
  std::vector<Row*> rows;  // rows computing at least one position, in order
  std::vector<const DraftQuery*> queries;
  std::vector<size_t> of;       // index of each row's query
  std::vector<int64_t> want;    // drafts each row wants
  std::vector<int32_t> aux;     // rows of the target's buffer, 3 per fused position (low, mid, high)
  std::vector<int32_t> source;  // per fed position: >= 0 a fused position, -1 - i carry_reads[i]
  std::vector<int32_t> carry_reads;
  std::vector<std::pair<int32_t, int64_t>> carry_writes;  // (fused position, slot)
  std::vector<int64_t> freed;                             // carry slots read for the last time
};

Eagle3Drafter::Eagle3Drafter(ModelRunner& target, const ModelConfig& target_cfg, const EngineConfig& cfg,
                             int64_t kv_blocks)
    : be_(target.backend()), target_model_(target.model()), target_(target),
      k_(cfg.speculative_config.num_speculative_tokens), max_rows_(std::max<int64_t>(1, cfg.max_num_seqs)),
      bm_(kv_blocks, cfg.block_size, /*enable_prefix_caching=*/false) {
  const Eagle3Config hc = eagle3_config_for(cfg, target_cfg);
  if (!target_model_.aux_hidden_states().defined())
    throw Error("eagle3: the target model captures no hidden states (its runner was built without method eagle3)");
  be_.synchronize();  // outside any step: what is allocated below stays
  head_ = std::make_unique<Eagle3Head>(hc, be_);
  const std::string dir = cfg.load_dummy ? "" : head_dir(cfg);
  const Tensor* embedding = target_model_.embedding_table();  // null: a tensor-parallel shard
  Tensor whole;                                               // (the head keeps its own reference)
  if (!embedding && !head_has_embedding(dir)) {
    whole = whole_target_embedding(cfg, target_cfg, be_);
    embedding = &whole;
  }
  head_->load(dir, embedding);
  const ModelConfig& m = hc.layer;
  const int64_t H = m.hidden_size, V = m.vocab_size, Vd = hc.draft_vocab_size;
  kv_cache_ = be_.empty({2, kv_blocks, cfg.block_size, m.num_key_value_heads, m.head_dim}, be_.act_dtype());
  const Shape plane{kv_blocks, cfg.block_size, m.num_key_value_heads, m.head_dim};
  Tensor flat = kv_cache_.view({2, kv_blocks * cfg.block_size * m.num_key_value_heads * m.head_dim});
  kv_ = {flat.rows(0, 1).view(plane), flat.rows(1, 2).view(plane), KVScales{}};
  carry_ = be_.empty({max_rows_, H}, be_.act_dtype());
  next_hidden_ = be_.empty({max_rows_, H}, be_.act_dtype());
  for (int64_t i = max_rows_ - 1; i >= 0; --i) free_carries_.push_back(i);
  const std::vector<int32_t>& d2t = head_->draft_to_target();
  for (int64_t d = 0; d < Vd; ++d) identity_vocab_ = identity_vocab_ && d2t[size_t(d)] == d;
  identity_vocab_ = identity_vocab_ && Vd == V;
  if (identity_vocab_) return;
  // Vd: past the rows of a row's draft logits, so an unmapped target id reads a zero.
  std::vector<int32_t> t2d(static_cast<size_t>(V), static_cast<int32_t>(Vd));
  std::vector<float> mask(size_t(V), -std::numeric_limits<float>::infinity());
  for (int64_t d = 0; d < Vd; ++d) {
    t2d[size_t(d2t[size_t(d)])] = int32_t(d);
    mask[size_t(d2t[size_t(d)])] = 0;
  }
  target_ids_ = be_.empty({V}, DType::I32);
  be_.upload(t2d.data(), DType::I32, target_ids_);
  vocab_mask_ = be_.empty({V}, be_.weight_dtype());
  be_.upload(mask.data(), DType::F32, vocab_mask_);
}

Eagle3Drafter::~Eagle3Drafter() = default;

void Eagle3Drafter::reset(Row& r) {
  if (r.shadow) {
    bm_.deallocate(*r.shadow);
    r.shadow->token_ids.clear();
  }
  if (r.carry >= 0) free_carries_.push_back(r.carry);
  r.carry = -1;
  r.fed = 0;
}

void Eagle3Drafter::release(int64_t seq_id) {
  auto it = rows_.find(seq_id);
  if (it == rows_.end()) return;
  reset(it->second);
  rows_.erase(it);
}

bool Eagle3Drafter::plan(const DraftQuery& q, bool drafting, Pass& pass) {
  const int64_t n = int64_t(q.tokens.size());
  // Verified positions the target computed: before the new token (drafting), or the whole chunk.
  const int64_t computed_end = drafting ? n - 1 : n, feed_end = n - 1;  // feed_end: the next token is known
  const ModelRunner::StepRows* rec = nullptr;
  for (const auto& sr : target_.last_step_rows())
    if (sr.seq_id == q.seq_id) rec = &sr;
  Row& r = rows_[q.seq_id];
  if (!r.shadow) {
    SamplingParams p = q.params ? *q.params : SamplingParams{};
    r.shadow = std::make_unique<Sequence>(q.seq_id, std::vector<int32_t>{}, p, bm_.block_size(), q.seed);
    r.shadow->status = SequenceStatus::Running;
  }
  const int64_t rec_begin = rec ? rec->first_position : 0;
  const int64_t rec_end = rec ? std::min(rec->first_position + rec->num_rows, computed_end) : 0;
  int64_t next = r.base + r.fed + (r.carry >= 0 ? 1 : 0);  // the first position wanted from this step
  if (!rec || next < rec_begin || next > rec_end) {        // the step's rows do not continue ours: restart there
    reset(r);
    r.base = next = rec_begin;
    if (!rec || rec_end <= rec_begin) return false;
  }
  const int64_t need = r.base + r.fed, fend = std::min(rec_end, feed_end), count = fend - need;
  const int64_t drafts = drafting ? std::min(q.max_drafts, k_) : 0;
  if (drafting && (count <= 0 || drafts <= 0)) return false;  // no logits to draft from
  Sequence& s = *r.shadow;
  if (count > 0) {
    s.token_ids.assign(q.tokens.begin() + (r.base + 1),
                       q.tokens.end());  // t[base + 1..n): shadow index i -> t[base + i + 1]
    s.num_cached_tokens = r.fed;
    bm_.trim(s, r.fed);  // drafted positions' K/V
    const int64_t slots = fend - r.base + std::max<int64_t>(0, drafts - 1);
    if (!bm_.can_append(s, slots - s.num_tokens())) {
      reset(r);
      return false;
    }
    bm_.may_append(s, slots - s.num_tokens());
    s.num_scheduled_tokens = count;
  }
  const int32_t first = int32_t(pass.aux.size() / 3);
  const int64_t cap = target_model_.aux_rows_per_layer();
  for (int64_t p = next; p < rec_end; ++p)
    for (int64_t j = 0; j < 3; ++j) pass.aux.push_back(int32_t(j * cap + rec->first_row + (p - rec_begin)));
  if (count > 0 && r.carry >= 0) {
    pass.source.push_back(-1 - int32_t(pass.carry_reads.size()));
    pass.carry_reads.push_back(int32_t(r.carry));
    pass.freed.push_back(r.carry);
    r.carry = -1;
  }
  for (int64_t p = std::max(next, need); p < fend; ++p) pass.source.push_back(first + int32_t(p - next));
  r.fed += std::max<int64_t>(0, count);
  // A prompt chunk's last position: its next token comes with the next chunk.
  if (!drafting && rec_end > feed_end && feed_end >= next && r.carry < 0 && !free_carries_.empty()) {
    r.carry = free_carries_.back();
    free_carries_.pop_back();
    pass.carry_writes.emplace_back(first + int32_t(feed_end - next), r.carry);
  }
  if (count > 0) {
    pass.rows.push_back(&r);
    pass.queries.push_back(&q);
    pass.want.push_back(drafts);
  }
  return count > 0;
}

Tensor Eagle3Drafter::catch_up_input(const Pass& pass) {
  const int64_t H = head_->config().layer.hidden_size, Ra = int64_t(pass.aux.size() / 3);
  const int64_t T = int64_t(pass.source.size()), Rc = int64_t(pass.carry_reads.size());
  Tensor fused;
  if (Ra > 0) {
    Tensor aux = be_.empty({Ra, 3 * H}, be_.act_dtype());
    Tensor aux_rows = aux.view({3 * Ra, H});  // row 3r + j: layer j's state of position r
    be_.gather_rows(target_model_.aux_hidden_states(), pass.aux, aux_rows);
    fused = head_->fuse(aux);  // [Ra, H]
  }
  Tensor hidden = fused;
  bool direct = Rc == 0 && T == Ra;
  for (int64_t i = 0; direct && i < T; ++i) direct = pass.source[size_t(i)] == i;
  if (!direct && T > 0) {
    Tensor all = be_.empty({Ra + Rc, H}, be_.act_dtype());
    if (Ra > 0) {
      Tensor dst = all.rows(0, Ra);
      be_.cast(fused, dst);
    }
    if (Rc > 0) {
      Tensor dst = all.rows(Ra, Ra + Rc);
      be_.gather_rows(carry_, pass.carry_reads, dst);
    }
    std::vector<int32_t> order;
    for (int32_t s : pass.source) order.push_back(s >= 0 ? s : int32_t(Ra) + (-1 - s));
    hidden = be_.empty({T, H}, be_.act_dtype());
    be_.gather_rows(all, order, hidden);
  }
  for (const auto& [row, slot] : pass.carry_writes) {  // after the reads above (stream order)
    Tensor dst = carry_.rows(slot, slot + 1);
    be_.gather_rows(fused, {row}, dst);
  }
  return hidden;
}

Tensor Eagle3Drafter::run(const std::vector<Row*>& rows, const Tensor& hidden) {
  ScheduledBatch b;
  for (Row* r : rows) {
    b.seqs.push_back(r->shadow.get());
    b.num_tokens += r->shadow->num_scheduled_tokens;
    b.is_prefill = b.is_prefill || r->shadow->num_scheduled_tokens > 1;
  }
  StepInputs in = ModelRunner::prepare(b, bm_.block_size());
  size_t t = 0;
  for (Row* r : rows)
    for (int64_t j = 0; j < r->shadow->num_scheduled_tokens; ++j) in.positions[t++] += int32_t(r->base);
  const int64_t T = int64_t(in.input_ids.size());
  Tensor ids = be_.empty({T}, DType::I32), pos = be_.empty({T}, DType::I32);
  be_.upload(in.input_ids.data(), DType::I32, ids);
  be_.upload(in.positions.data(), DType::I32, pos);
  be_.prepare_metadata(in.md);
  const Eagle3Head::Output out = head_->forward(ids, pos, hidden, kv_, in.md);
  Tensor nh = next_hidden_.rows(0, int64_t(rows.size()));
  be_.gather_rows(out.prenorm, in.last_rows, nh);
  for (Row* r : rows) {
    r->shadow->num_cached_tokens += r->shadow->num_scheduled_tokens;
    r->shadow->num_scheduled_tokens = 0;
  }
  return head_->compute_logits(out.normed, in.last_rows);
}

std::vector<int32_t> Eagle3Drafter::sample(const Tensor& logits, const std::vector<const DraftQuery*>& queries,
                                           const std::vector<int64_t>& positions) {
  std::vector<SamplingRow> rows;
  bool sampled = false;
  for (size_t i = 0; i < queries.size(); ++i) {
    const SamplingParams p = queries[i]->params ? *queries[i]->params : SamplingParams{};
    rows.push_back({p.temperature, p.top_k, p.top_p, p.min_p, queries[i]->seed, positions[i]});
    sampled = sampled || p.temperature > 0;
  }
  if (identity_vocab_) return be_.sample(logits, rows);
  if (!sampled) {  // greedy: the argmax over the head's vocabulary is the target-vocabulary one
    std::vector<int32_t> tokens = be_.sample(logits, rows);
    for (int32_t& t : tokens) t = head_->draft_to_target()[size_t(t)];
    return tokens;
  }
  // Over the target's vocabulary, -inf outside the head's: the sampler's noise is the target's.
  const int64_t B = logits.size(0), Vd = logits.size(1), V = target_ids_.size(0);
  Tensor full = be_.empty({B, V}, logits.dtype());
  for (int64_t b = 0; b < B; ++b) {
    Tensor table = logits.rows(b, b + 1).view({Vd, 1}), dst = full.rows(b, b + 1).view({V, 1});
    be_.embedding(target_ids_, table, dst, 0);  // dst[t] = logits[b, t2d[t]], 0 where unmapped
  }
  be_.add_bias(full, vocab_mask_);
  return be_.sample(full, rows);
}

void Eagle3Drafter::observe_prefill(std::span<const DraftQuery> queries) {
  Pass pass;
  for (const DraftQuery& q : queries)
    if (!q.tokens.empty()) plan(q, false, pass);
  if (pass.aux.empty()) return;
  be_.begin_step();
  const Tensor hidden = catch_up_input(pass);
  if (!pass.rows.empty()) run(pass.rows, hidden);  // the logits of prompt chunks are not wanted
  for (int64_t slot : pass.freed) free_carries_.push_back(slot);
  be_.synchronize();  // ends the step (nothing sampled)
}

void Eagle3Drafter::propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) {
  out.assign(queries.size(), {});
  Pass pass;
  for (size_t i = 0; i < queries.size(); ++i) {
    const DraftQuery& q = queries[i];
    if (q.tokens.empty() || q.max_drafts <= 0) continue;
    if (plan(q, true, pass)) pass.of.push_back(i);
  }
  if (pass.rows.size() > size_t(max_rows_))
    throw Error("eagle3: " + std::to_string(pass.rows.size()) + " rows exceed max_num_seqs " +
                std::to_string(max_rows_));
  if (pass.aux.empty() && pass.rows.empty()) return;
  be_.begin_step();
  Tensor hidden = catch_up_input(pass);
  for (int64_t slot : pass.freed) free_carries_.push_back(slot);
  if (pass.rows.empty()) {
    be_.synchronize();
    return;
  }
  std::vector<Row*> rows = pass.rows;
  std::vector<const DraftQuery*> qs = pass.queries;
  std::vector<size_t> of = pass.of;
  std::vector<int64_t> want = pass.want;
  Tensor logits = run(rows, hidden);
  while (!rows.empty()) {
    std::vector<int64_t> positions;
    for (size_t j = 0; j < rows.size(); ++j) positions.push_back(int64_t(qs[j]->tokens.size() + out[of[j]].size()));
    const std::vector<int32_t> tokens = sample(logits, qs, positions);
    // The rows still drafting, and where their hidden state is in next_hidden_.
    std::vector<Row*> next;
    std::vector<const DraftQuery*> next_qs;
    std::vector<size_t> next_of;
    std::vector<int64_t> next_want;
    std::vector<int32_t> keep;
    for (size_t j = 0; j < rows.size(); ++j) {
      out[of[j]].push_back(tokens[j]);
      if (int64_t(out[of[j]].size()) >= want[j]) continue;
      rows[j]->shadow->token_ids.push_back(tokens[j]);
      rows[j]->shadow->num_scheduled_tokens = 1;
      next.push_back(rows[j]);
      next_qs.push_back(qs[j]);
      next_of.push_back(of[j]);
      next_want.push_back(want[j]);
      keep.push_back(int32_t(j));
    }
    if (next.empty()) break;
    be_.begin_step();
    const int64_t H = head_->config().layer.hidden_size;
    Tensor h = be_.empty({int64_t(next.size()), H}, be_.act_dtype());
    be_.gather_rows(next_hidden_.rows(0, int64_t(rows.size())), keep, h);
    rows = std::move(next);
    qs = std::move(next_qs);
    of = std::move(next_of);
    want = std::move(next_want);
    logits = run(rows, h);
  }
}

}  // namespace nanovllm
