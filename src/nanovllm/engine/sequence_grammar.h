// Structured outputs in the engine: a constrained sequence's grammar state (its matcher, and for
// reasoning models the token after which the constraint starts), the masks of a batch's
// constrained rows before sampling, and the matcher's advance after.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nanovllm/structured/matcher.h"

namespace nanovllm {

class Sequence;
struct ScheduledBatch;
struct SamplingRow;

struct SequenceGrammar {
  SequenceGrammar(std::shared_ptr<const structured::CompiledGrammar> g, int32_t start_after)
      : matcher(std::move(g)), start_after_token(start_after), active(start_after < 0) {}
  structured::GrammarMatcher matcher;
  int32_t start_after_token;  // -1: constrained from the first token
  bool active;                // the constraint has started
  // The next token is masked: started and not finished (after the grammar's stop token, as vLLM,
  // the output is free: only ignore_eos gets there).
  bool constrains_next() const { return active && !matcher.is_terminated(); }
};

// Advances seq's grammar by its newly sampled token; false when the token breaks the grammar
// (never with the mask applied).
bool advance_grammar(SequenceGrammar& g, int32_t token);

// The allowed-token masks of a batch's constrained rows, filled in parallel (each sequence has its
// own matcher; the compiled grammars are shared read-only) into storage kept across steps.
class GrammarMasks {
 public:
  // For each row i of batch that samples a token (every row with all_rows_sample, else those whose
  // prompt or decode is complete) and whose sequence masks it (Sequence::masks_next: its grammar,
  // its TokenRestrictions, or both combined), points rows[i].allowed at its mask; other rows keep
  // null. The masks live until the next fill.
  void fill(const ScheduledBatch& batch, std::vector<SamplingRow>& rows, bool all_rows_sample = false);
  // The same over sequences row by row; a null sequence's row keeps no mask. Consecutive rows of
  // one sequence are a verify row's positions: row j's mask is the one after the sequence's first
  // j drafts (its grammar forked and advanced by them, its restrictions over them as context).
  void fill(const std::vector<Sequence*>& seqs, std::vector<SamplingRow>& rows, bool all_rows_sample);

 private:
  std::vector<uint32_t> storage_;
};

}  // namespace nanovllm
