// GrammarCompiler: automaton + token-mask cache per grammar, LRU-cached by request text (compiler.h).
#include "nanovllm/structured/compiler.h"

#include <chrono>

#include "nanovllm/structured/compiled_grammar.h"

namespace nanovllm::structured {

GrammarCompiler::GrammarCompiler(std::shared_ptr<const Vocabulary> vocab, CompileLimits limits)
    : vocab_(std::move(vocab)), limits_(limits), index_vocab_(std::make_shared<VocabIndex>(vocab_)) {
  if (vocab_->matchable.size() != vocab_->bytes.size())
    throw Error("structured outputs: the vocabulary's matchable flags do not cover its tokens");
}

GrammarCompiler::~GrammarCompiler() = default;

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const Grammar& grammar) {
  AutomatonLimits al;
  al.max_states = limits_.max_states;
  al.max_rules = limits_.max_rules;
  return std::make_shared<const CompiledGrammar>(build_automaton(grammar, al), index_vocab_,
                                                 limits_.max_compile_seconds);
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::cached(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void GrammarCompiler::remember(const std::string& key, std::shared_ptr<const CompiledGrammar> g) {
  const size_t size = g->bytes() + key.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key) || size > limits_.cache_bytes) return;
  lru_.emplace_front(key, std::move(g));
  index_[key] = lru_.begin();
  cached_bytes_ += size;
  while (cached_bytes_ > limits_.cache_bytes && !lru_.empty()) {
    cached_bytes_ -= lru_.back().second->bytes() + lru_.back().first.size();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t GrammarCompiler::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

}  // namespace nanovllm::structured
