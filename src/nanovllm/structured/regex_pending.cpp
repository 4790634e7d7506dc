// Placeholder for regex.h until the regex converter lands on this branch's base: every call is a
// GrammarError, so a schema `pattern` is refused (never ignored). DELETE this file when regex.cpp
// is merged (the duplicate definitions then fail the link, which is the reminder).
#include "nanovllm/structured/regex.h"

namespace nanovllm::structured {

int32_t add_regex(Grammar&, std::string_view pattern, const RegexOptions&, const std::string&) {
  throw GrammarError("regular expressions are not supported in this build (pattern '" + std::string(pattern) + "')");
}

Grammar regex_to_grammar(std::string_view pattern, const RegexOptions& opt) {
  Grammar g;
  g.set_root(g.add_rule("root", add_regex(g, pattern, opt, "root")));
  return g;
}

}  // namespace nanovllm::structured
