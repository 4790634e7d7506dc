// POST /v1/completions and /v1/chat/completions once the body is parsed: submit to the engine
// loop, then either wait for the whole result (JSON) or stream it as server-sent events.
#pragma once
#include <httplib.h>

#include "nanovllm/server/server_state.h"

namespace nanovllm::server {

// Fills `res`; throws ApiError for failures known before the first byte is sent.
void serve_generation(ServerState& st, GenerationRequest req, httplib::Response& res);

}  // namespace nanovllm::server
