// JSON string content for the JSON Schema converter: one character of a JSON string (raw or
// escaped), object keys other than a given set of names, and a schema `pattern` (an unanchored
// ECMAScript search, turned into the whole-string match that regex.h builds).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured::detail {

// One character of JSON string content: a raw code point other than `"`, `\` and U+0000-U+001F,
// or an escape (\" \\ \/ \b \f \n \r \t, \uXXXX of a non-surrogate, or a \uD8xx\uDCxx pair).
// A reference to the shared rule "json_char".
int32_t json_char(Grammar& g);

// The content of a key that is none of `names`: decoded, it differs from each. Where a key shares
// a prefix with a name, that prefix is matched in its raw spelling (a tighter grammar: a key that
// escapes characters a name has in the same place is not produced).
int32_t key_excluding(Grammar& g, const std::vector<std::string>& names);

// `pattern` (found by search, as JSON Schema defines it) as a whole-string expression: each
// top-level alternative without a leading ^ gets [\s\S]* before it, without a trailing $ after it.
std::string search_to_full_match(std::string_view pattern);

}  // namespace nanovllm::structured::detail
