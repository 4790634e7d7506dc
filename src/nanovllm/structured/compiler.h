// StructuredOutputs (a request's JSON schema, regex, choice or grammar) -> CompiledGrammar: the
// grammar (grammar.h) from the matching converter, its per-rule byte automata and the token-mask
// cache over one vocabulary. Compiled grammars are cached by the request's text (LRU, bounded in
// bytes); compile() is thread-safe.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "nanovllm/config/structured_outputs.h"
#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/vocabulary.h"

namespace nanovllm::structured {

class CompiledGrammar;
struct VocabIndex;

struct CompileLimits {
  size_t max_input_bytes = 1 << 20;        // schema / regex / grammar text
  int max_schema_depth = 64;               // nesting of a JSON schema
  int max_rules = 20000;                   // rules after conversion
  int max_states = 200000;                 // automaton states over all rules
  double max_compile_seconds = 10;         // refused past this (the token masks' build stops there)
  size_t cache_bytes = size_t(512) << 20;  // LRU bound on the cached compiled grammars
};

// The grammar a request asks for (no vocabulary involved); throws GrammarError naming the fault.
Grammar build_grammar(const StructuredOutputs& spec, const CompileLimits& limits);

class GrammarCompiler {
 public:
  GrammarCompiler(std::shared_ptr<const Vocabulary> vocab, CompileLimits limits = {});
  ~GrammarCompiler();
  // Cached by spec.cache_key(). Throws InvalidRequest("structured_outputs", ...) naming the fault.
  std::shared_ptr<const CompiledGrammar> compile(const StructuredOutputs& spec);
  std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar);  // uncached
  const Vocabulary& vocabulary() const { return *vocab_; }
  const CompileLimits& limits() const { return limits_; }
  size_t cached_bytes() const;

 private:
  std::shared_ptr<const CompiledGrammar> cached(const std::string& key);
  void remember(const std::string& key, std::shared_ptr<const CompiledGrammar> g);

  std::shared_ptr<const Vocabulary> vocab_;
  CompileLimits limits_;
  std::shared_ptr<const VocabIndex> index_vocab_;
  mutable std::mutex mu_;
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t cached_bytes_ = 0;
};

}  // namespace nanovllm::structured
