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
  struct Todo {
    size_t row;
    const Sequence* seq;
    size_t drafts_before;  // a verify row's position j: the mask after the drafts before it
  };
  std::vector<Todo> todo;
  size_t words = 0;
  for (size_t i = 0, j = 0; i < seqs.size(); ++i) {
    const Sequence* s = seqs[i];
    j = i > 0 && s && s == seqs[i - 1] ? j + 1 : 0;  // a verify row's rows follow each other
    if (!s || !(s->grammar || s->restrictions) || (j == 0 && !s->masks_next())) continue;
    if (!all_rows_sample && s->num_cached_tokens + s->num_scheduled_tokens < s->num_tokens())
      continue;  // a prompt chunk without a token
    todo.push_back({i, s, j});
    words = s->restrictions ? s->restrictions->mask_words() : s->grammar->matcher.mask_words();
  }
  if (todo.empty()) return;
  if (storage_.size() < todo.size() * words) storage_.resize(todo.size() * words);
  std::vector<uint8_t> masked(todo.size(), 1);
  const int64_t n = int64_t(todo.size());
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int64_t k = 0; k < n; ++k) {
    const auto [row, seq, j] = todo[size_t(k)];
    const Sequence& s = *seq;
    uint32_t* mask = storage_.data() + size_t(k) * words;
    std::fill(mask, mask + words, ~0u);
    if (j == 0) {
      if (s.grammar && s.grammar->constrains_next()) s.grammar->matcher.fill_mask(mask);
      if (s.restrictions) s.restrictions->apply(mask, s.token_ids, s.num_prompt_tokens);
      continue;
    }
    // Draft position j: a fork of the grammar advanced by drafts 0..j-1. A draft the grammar
    // refuses is refused by the mask before it too, so no row after it is kept: any mask does.
    bool constrained = false;
    if (s.grammar) {
      SequenceGrammar g = *s.grammar;
      bool ok = true;
      for (size_t d = 0; d < j && ok; ++d) ok = advance_grammar(g, s.draft_ids[d]);
      if (ok && g.constrains_next()) {
        g.matcher.fill_mask(mask);
        constrained = true;
      }
    }
    if (s.restrictions) {
      std::vector<int32_t> context(s.token_ids);
      context.insert(context.end(), s.draft_ids.begin(), s.draft_ids.begin() + std::ptrdiff_t(j));
      s.restrictions->apply(mask, context, s.num_prompt_tokens);
      constrained = true;
    }
    masked[size_t(k)] = constrained;
  }
  for (size_t k = 0; k < todo.size(); ++k)
    if (masked[k]) rows[todo[k].row].allowed = storage_.data() + k * words;
}

}  // namespace nanovllm
