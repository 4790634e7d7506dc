// GrammarMatcher (matcher.h): a history of configurations over one frame pool.
#include "nanovllm/structured/matcher.h"

#include "nanovllm/structured/compiled_grammar.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::structured {

struct MatcherState {
  FramePool pool;
  std::vector<Config> history;   // [0] the start; back() the current configuration
  std::vector<uint8_t> stopped;  // per history entry: reached by a stop token
  PrefixWalker walker;           // fill_mask's scratch
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(std::make_unique<MatcherState>()) {
  state_->history.push_back(initial_config(grammar_->automaton, state_->pool));
  state_->stopped.push_back(0);
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& o)
    : grammar_(o.grammar_), state_(std::make_unique<MatcherState>(*o.state_)) {}
GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& o) {
  if (this != &o) {
    grammar_ = o.grammar_;
    state_ = std::make_unique<MatcherState>(*o.state_);
  }
  return *this;
}
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::accept_token(int32_t token) {
  if (is_terminated()) return false;
  const VocabIndex& v = *grammar_->vocab;
  if (token < 0 || token >= v.vocab->size()) return false;
  const Config& cur = state_->history.back();
  if (v.is_stop[size_t(token)]) {
    if (!cur.at_bottom) return false;
    state_->history.push_back(Config{});
    state_->stopped.push_back(1);
    return true;
  }
  if (v.rank[size_t(token)] < 0) return false;
  const size_t mark = state_->pool.size();
  Config next;
  if (!accepts_bytes(grammar_->automaton, state_->pool, cur, v.vocab->bytes[size_t(token)], &next)) {
    state_->pool.truncate(mark);
    return false;
  }
  state_->history.push_back(std::move(next));
  state_->stopped.push_back(0);
  return true;
}

void GrammarMatcher::fill_mask(uint32_t* words) const {
  if (is_terminated()) {
    for (size_t w = 0; w < mask_words(); ++w) words[w] = 0;
    return;
  }
  fill_token_mask(grammar_->automaton, *grammar_->vocab, grammar_->masks, state_->pool, state_->walker,
                  state_->history.back(), words);
}

size_t GrammarMatcher::mask_words() const { return grammar_->vocab->vocab->mask_words(); }
bool GrammarMatcher::can_end() const { return !is_terminated() && state_->history.back().at_bottom; }
bool GrammarMatcher::is_terminated() const { return state_->stopped.back() != 0; }
int GrammarMatcher::num_accepted() const { return int(state_->history.size()) - 1; }

void GrammarMatcher::rollback(int num_tokens) {
  if (num_tokens < 0 || num_tokens > num_accepted())
    throw Error("grammar matcher: cannot roll back " + std::to_string(num_tokens) + " tokens of " +
                std::to_string(num_accepted()));
  state_->history.resize(state_->history.size() - size_t(num_tokens));
  state_->stopped.resize(state_->history.size());
}

}  // namespace nanovllm::structured
