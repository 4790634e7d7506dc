#include "nanovllm/engine/sequence_grammar.h"

#include <algorithm>

#include "nanovllm/backends/backend.h"
#include "nanovllm/engine/scheduler.h"
#include "nanovllm/engine/sequence.h"

namespace nanovllm {

bool advance_grammar(SequenceGrammar& g, int32_t token) {
  if (!g.active) {
    g.active = token == g.start_after_token;
    return true;
  }
  if (g.matcher.is_terminated()) return true;
  return g.matcher.accept_token(token);
}

void GrammarMasks::fill(const ScheduledBatch& batch, std::vector<SamplingRow>& rows, bool all_rows_sample) {
  fill(batch.seqs, rows, all_rows_sample);
}

void GrammarMasks::fill(const std::vector<Sequence*>& seqs, std::vector<SamplingRow>& rows, bool all_rows_sample) {
  std::vector<std::pair<size_t, Sequence*>> todo;
  size_t words = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence* s = seqs[i];
    if (!s || !s->masks_next()) continue;
    if (!all_rows_sample && s->num_cached_tokens + s->num_scheduled_tokens < s->num_tokens())
      continue;  // a prompt chunk without a token
    todo.push_back({i, s});
    words = s->restrictions ? s->restrictions->mask_words() : s->grammar->matcher.mask_words();
  }
  if (todo.empty()) return;
  if (storage_.size() < todo.size() * words) storage_.resize(todo.size() * words);
  const int64_t n = int64_t(todo.size());
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int64_t k = 0; k < n; ++k) {
    const Sequence& s = *todo[size_t(k)].second;
    uint32_t* mask = storage_.data() + size_t(k) * words;
    if (s.grammar && s.grammar->constrains_next())
      s.grammar->matcher.fill_mask(mask);
    else
      std::fill(mask, mask + words, ~0u);
    if (s.restrictions) s.restrictions->apply(mask, s.token_ids, s.num_prompt_tokens);
  }
  for (size_t k = 0; k < todo.size(); ++k) rows[todo[k].first].allowed = storage_.data() + k * words;
}

}  // namespace nanovllm
