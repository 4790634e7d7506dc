// Regular expression -> grammar (grammar.h): the syntax vLLM users send in `regex` / `pattern`
// (Python `re` / ECMAScript common subset). The whole output matches the expression.
#pragma once
#include <cstdint>
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
  // The most grammar units the expression may expand to once counted repeats are unrolled (a
  // literal byte or a character class is one unit; a{3} is three): nested counted repeats like
  // ((a{1000}){1000}) are refused here rather than exploding in the automaton compiler.
  int64_t max_expansion = 100000;
};

// Adds the expression to `g` and returns the expression id matching it (helper rules, if any,
// named from `rule_base`; the current conversion needs none). Throws GrammarError naming the
// construct and its offset (backreferences, lookaround, \b, anchors not at the ends, bounds past
// max_repeat, an expansion past max_expansion, syntax errors). The syntax accepted and the choices
// made where Python and ECMAScript differ are listed in regex_parser.cpp; \d \w \s in
// regex_chars.h; `.` is any code point but \n (Python's reading; JavaScript's also leaves out \r,
// U+2028 and U+2029).
int32_t add_regex(Grammar& g, std::string_view pattern, const RegexOptions& opt = {},
                  const std::string& rule_base = "regex");
Grammar regex_to_grammar(std::string_view pattern, const RegexOptions& opt = {});

}  // namespace nanovllm::structured
