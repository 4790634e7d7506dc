// Per-sequence matching state of a compiled grammar: which tokens may come next (a bitmask over the
// vocabulary), advanced one sampled token at a time. Copying a matcher forks it (n > 1 siblings);
// rollback undoes accepted tokens (rejected speculative drafts).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace nanovllm::structured {

class CompiledGrammar;
struct MatcherState;

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  // Advances by one token; false (nothing changes) when the grammar does not allow it. A stop
  // token is accepted only where the grammar can end, and terminates the matcher.
  bool accept_token(int32_t token);
  // Sets words[0 .. mask_words()) to the allowed next tokens: bit (t % 32) of words[t / 32]. Stop
  // tokens are allowed where the text so far is complete; after termination nothing is allowed.
  void fill_mask(uint32_t* words) const;
  size_t mask_words() const;
  bool can_end() const;        // the text so far is a complete match
  bool is_terminated() const;  // a stop token was accepted
  // Undoes the last `num_tokens` accepted tokens (at most the number accepted).
  void rollback(int num_tokens);
  int num_accepted() const;

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<MatcherState> state_;
};

}  // namespace nanovllm::structured
