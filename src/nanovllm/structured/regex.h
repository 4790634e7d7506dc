// Regular expression -> grammar (grammar.h): the syntax vLLM users send in `regex` / `pattern`
// (Python `re` / ECMAScript common subset). The whole output matches the expression.
#pragma once
#include <string>
#include <string_view>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

struct RegexOptions {
  // The expression describes the decoded value of a JSON string (a schema's `pattern`): every code
  // point the expression admits is emitted as JSON string content (`"` -> \", `\` -> \\, control
  // characters -> \n, \t, ... or \u00XX), so the grammar produces valid JSON string text.
  bool json_string_content = false;
  int max_repeat = 1000;  // largest {m,n} bound accepted
};

// Adds the expression to `g` and returns the expression id matching it (helper rules, if any,
// named from `rule_base`). Throws GrammarError naming the construct and its offset (backreferences,
// lookaround, \b, anchors not at the ends, bounds past max_repeat, syntax errors).
int32_t add_regex(Grammar& g, std::string_view pattern, const RegexOptions& opt = {},
                  const std::string& rule_base = "regex");
Grammar regex_to_grammar(std::string_view pattern, const RegexOptions& opt = {});

}  // namespace nanovllm::structured
