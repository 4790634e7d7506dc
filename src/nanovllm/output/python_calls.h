// A Python list of function calls with literal keyword arguments, `[f(a=1, b="x"), g()]`, read as
// vLLM's pythonic tool parser reads it with Python's ast: each argument must be a literal -- a
// string ('...' or "..." with Python's escapes), an int or float (a leading minus allowed), True,
// False, None, or a list or dict of literals (dict keys: strings) -- and becomes JSON. Anything
// else (positional arguments, names, expressions, f-strings, calls as values) is refused, and the
// caller keeps the text as content. Nesting is limited, so hostile output cannot exhaust the stack.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::output {

struct PythonCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object: keyword -> value, in the call's order
};

// Empty optional when `text` (whitespace around it allowed) is not such a list, or lists no call.
std::optional<std::vector<PythonCall>> parse_python_calls(std::string_view text);

}  // namespace nanovllm::output
