// Server-sent events framing, as OpenAI streams use it: each message is "data: <json>\n\n" and
// the stream ends with "data: [DONE]\n\n".
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace nanovllm::server::sse {

template <class Json>
inline void append_event(std::string& out, const Json& j) {
  out += "data: ";
  out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  out += "\n\n";
}

inline void append_done(std::string& out) { out += "data: [DONE]\n\n"; }

}  // namespace nanovllm::server::sse
