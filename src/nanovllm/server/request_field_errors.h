// The request parsers' shared helpers (openai_requests, responses_request, chat_tools,
// openai_logprobs): a 400 naming the offending field as vLLM answers it, and a field that is
// present and not null.
#pragma once
#include <string>

#include "nanovllm/server/api_error.h"
#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server::fields {

[[noreturn]] inline void bad(const std::string& param, const std::string& msg,
                             const std::string& code = "invalid_value") {
  throw ApiError(400, msg, param, code);
}

[[noreturn]] inline void wrong_type(const std::string& param, const std::string& want) {
  bad(param, "'" + param + "' must be " + want, "invalid_type");
}

// j[name], or null when it is missing or JSON null.
inline const ojson* field(const ojson& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace nanovllm::server::fields
