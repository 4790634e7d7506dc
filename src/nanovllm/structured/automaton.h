// Grammar (grammar.h) -> one deterministic byte automaton per rule, plus call edges: a recursive
// transition network that the matcher runs as a pushdown automaton (stack of return states).
//
// Each rule's body becomes a Thompson NFA over bytes (character classes as UTF-8 byte-range paths,
// utf8_ranges.h) with `call rule` edges, then a DFA by subset construction in which a call is one
// more input symbol. States are numbered globally; state s belongs to rule_of[s]; each rule starts at
// rule_start[r]. Bytes are grouped into classes (bytes no edge distinguishes), so a transition is
// next[s * num_classes + byte_class[b]] (-1: none).
//
// The build also checks and trims the grammar so that every configuration the matcher can reach
// can still be completed: rules that can never finish are removed (their call edges with them;
// the root being one is an error), states that cannot reach an accepting state lose their incoming
// edges, and left recursion (a rule reaching a call of itself without consuming a byte, which a
// pushdown matcher cannot run) is refused naming the rule. Each rule's return states (where its
// callers continue, anywhere in the grammar) let the token-mask cache follow a token out of a rule
// into every context the rule appears in, and reject tokens that no context accepts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

struct AutomatonLimits {
  int max_states = 200000;  // NFA and DFA states over all rules
  int max_rules = 20000;
  // The subset construction's work over all rules (NFA states and edges it touches), so that a short
  // expression whose DFA states each hold many NFA states is refused in well under a second. The
  // largest test grammar takes 0.6M; (a|b)*a(a|b){16} (131,073 states) 18M.
  int64_t max_work = 32'000'000;
};

struct Automaton {
  struct Call {
    int32_t rule = 0;    // the rule entered
    int32_t target = 0;  // this rule's state once the callee has finished
  };
  int32_t num_classes = 0;
  uint8_t byte_class[256] = {};
  std::vector<int32_t> next;        // [num_states * num_classes] -> state or -1
  std::vector<int32_t> call_begin;  // [num_states + 1] offsets into calls
  std::vector<Call> calls;
  std::vector<uint8_t> accepting;  // the rule may finish in this state
  std::vector<uint8_t> has_bytes;  // some byte leaves this state
  std::vector<int32_t> rule_of;
  std::vector<int32_t> rule_start;                  // per rule
  std::vector<std::vector<int32_t>> return_states;  // per rule: the targets of the calls of it
  std::vector<std::string> rule_names;
  int32_t root = 0;

  int32_t num_states() const { return int32_t(rule_of.size()); }
  int32_t step(int32_t s, uint8_t b) const { return next[size_t(s) * size_t(num_classes) + byte_class[b]]; }
  bool has_calls(int32_t s) const { return call_begin[size_t(s)] != call_begin[size_t(s) + 1]; }
  // Memory held, for the compiled-grammar cache's bound.
  size_t bytes() const;
};

// Throws GrammarError (undefined rule, left recursion naming the rule, a grammar that admits no
// complete string, past the limits).
Automaton build_automaton(const Grammar& g, const AutomatonLimits& limits = {});

}  // namespace nanovllm::structured
