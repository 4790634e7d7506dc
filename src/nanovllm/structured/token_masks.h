// Token masks: which tokens of the vocabulary may come next, from a pushdown configuration.
//
// As in xgrammar, most tokens' fate depends only on the automaton state of a top frame, not on the
// stack below it, so it is computed once per state when the grammar is compiled (StateMask): a walk
// over the vocabulary in byte order (a trie walk: tokens sharing a prefix share its steps) from the
// frame (state, kOut) classifies each token as
//   accepted   consumed entirely inside the rule (calls included), or ending exactly where the rule
//              finishes: allowed whatever the stack below;
//   uncertain  consumed only by leaving the rule partway into some place that calls it (pda.h's
//              contextual frames): depends on the real callers, checked at run time;
//   rejected   no context takes it.
// At run time (fill_token_mask) the mask is the union of the accepted sets of the configuration's
// top states plus the uncertain tokens that the full configuration accepts, walked in byte order
// again so that shared prefixes are stepped once.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nanovllm/structured/automaton.h"
#include "nanovllm/structured/pda.h"
#include "nanovllm/structured/vocabulary.h"

namespace nanovllm::structured {

// The vocabulary sorted by bytes, built once per vocabulary.
struct VocabIndex {
  explicit VocabIndex(std::shared_ptr<const Vocabulary> vocab);
  std::shared_ptr<const Vocabulary> vocab;
  std::vector<int32_t> sorted;    // matchable token ids in byte order
  std::vector<int32_t> lcp;       // common prefix length of sorted[i - 1] and sorted[i] (0 for i = 0)
  std::vector<int32_t> rank;      // token id -> its index in sorted (-1: not matchable)
  int32_t first_begin[257] = {};  // tokens starting with byte b: sorted[first_begin[b] .. first_begin[b + 1])
  std::vector<uint8_t> is_stop;   // per token id
  size_t max_len = 0;
};

// Configurations along the bytes of the current token, reused for the next token's common prefix;
// frames interned past a depth are dropped when the walk returns above it. Scratch kept across
// walks (a matcher keeps one: no allocation per mask once it has grown to the longest token).
class PrefixWalker {
 public:
  void reset(const Automaton& a, FramePool& pool, const Config& start, size_t max_len);
  // Steps through `tok` from its first `common` bytes (shared with the previous token); returns the
  // depth d reached: configurations 0..d are valid, and d < tok.size() means cfg(d) has no tops.
  size_t walk(const std::string& tok, size_t common);
  const Config& at(size_t d) const { return cfg_[d]; }
  void finish() { pool_->truncate(sizes_[0]); }

 private:
  const Automaton* a_ = nullptr;
  FramePool* pool_ = nullptr;  // set by reset(): a copied walker never uses its source's
  std::vector<Config> cfg_;
  std::vector<size_t> sizes_;
  size_t valid_ = 0;
};

struct StateMask {
  std::vector<uint32_t> accepted_bits;  // a bitset over token ids when large, else empty and:
  std::vector<int32_t> accepted;        // token ids
  std::vector<int32_t> uncertain;       // token ids in byte order
  size_t bytes() const { return accepted_bits.size() * 4 + accepted.size() * 4 + uncertain.size() * 4; }
};

// One entry per automaton state (empty for states without byte transitions). Throws GrammarError
// once the walks have taken more than max_seconds: an automaton of many states that each start many
// tokens, such as (a|b)*a(a|b){16}'s 131,073 against Qwen3's vocabulary, would otherwise keep the
// compile threads busy for many minutes.
std::vector<StateMask> build_state_masks(const Automaton& a, const VocabIndex& vocab, double max_seconds);

// Sets words (vocab.vocab->mask_words() of them) to the tokens allowed after `config`; stop tokens
// are allowed where config.at_bottom. `pool` gains no frames (scratch frames are dropped);
// `walker` is scratch.
void fill_token_mask(const Automaton& a, const VocabIndex& vocab, const std::vector<StateMask>& masks, FramePool& pool,
                     PrefixWalker& walker, const Config& config, uint32_t* words);

// Whether `bytes` can follow `config` (the configuration after them is returned in `out` when
// non-null; frames it needs stay in the pool).
bool accepts_bytes(const Automaton& a, FramePool& pool, const Config& config, const std::string& bytes, Config* out);

}  // namespace nanovllm::structured
