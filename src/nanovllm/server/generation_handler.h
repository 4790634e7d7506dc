// POST /v1/completions and /v1/chat/completions after validation: submits the request to the
// engine loop, then answers with one JSON response or an SSE stream. The status line goes out
// only once the engine has admitted the request, so a refusal is a plain error response (the
// router sends the ApiError this throws). A client that goes away, streaming or not, gets its
// request aborted and its KV blocks freed.
#pragma once
#include <boost/asio/awaitable.hpp>

#include "nanovllm/server/http_connection.h"
#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/pooling_protocol.h"
#include "nanovllm/server/server_state.h"

namespace nanovllm::server {

net::awaitable<void> serve_generation(ServerState& st, GenerationRequest req, Connection& c);
// POST /v1/embeddings, /pooling, /score, /rerank (pooling_protocol.h): the request's prompts go
// through the same engine loop; one JSON response once every output is in.
net::awaitable<void> serve_pooling(ServerState& st, PoolingRequest req, Connection& c);

}  // namespace nanovllm::server
