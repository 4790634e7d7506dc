// A grammar compiled against one vocabulary: its automaton and the per-state token-mask cache
// (token_masks.h). Immutable once built; shared by every matcher of every request that asks for
// the same grammar.
#pragma once
#include <memory>
#include <vector>

#include "nanovllm/structured/automaton.h"
#include "nanovllm/structured/token_masks.h"

namespace nanovllm::structured {

class CompiledGrammar {
 public:
  // max_seconds: the token-mask cache's time limit (build_state_masks).
  CompiledGrammar(Automaton a, std::shared_ptr<const VocabIndex> v, double max_seconds)
      : automaton(std::move(a)), vocab(std::move(v)), masks(build_state_masks(automaton, *vocab, max_seconds)) {}
  const Automaton automaton;
  const std::shared_ptr<const VocabIndex> vocab;
  const std::vector<StateMask> masks;
  size_t bytes() const {
    size_t n = automaton.bytes();
    for (const StateMask& m : masks) n += m.bytes() + sizeof(StateMask);
    return n;
  }
};

}  // namespace nanovllm::structured
