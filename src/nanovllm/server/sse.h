// Server-sent events framing, as OpenAI streams use it: each message is "data: <json>\n\n" and
// the stream ends with "data: [DONE]\n\n".
#pragma once
#include <string>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server::sse {

inline void append_event(std::string& out, const ojson& j) {
  out += "data: ";
  out += json_text(j);
  out += "\n\n";
}

inline void append_done(std::string& out) { out += "data: [DONE]\n\n"; }

}  // namespace nanovllm::server::sse
