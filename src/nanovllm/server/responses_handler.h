// The /v1/responses routes: POST /v1/responses (generation through the engine loop, answered as
// one response object or as the SDK's event stream), GET /v1/responses/{id} (a stored response,
// in_progress while it runs), POST /v1/responses/{id}/cancel (a running stored response: its
// request is aborted and it ends with status "cancelled"; one that has ended is a 400) and
// DELETE /v1/responses/{id} (OpenAI's; drops it from the store). Background mode is refused.
#pragma once
#include <functional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "nanovllm/server/http_connection.h"
#include "nanovllm/server/server_state.h"

namespace nanovllm::server {

// `path` without the query; `target` the request target (for GET's query); `body` parses the
// request's JSON body (415/400 on bad bodies); `header_id`: X-Request-Id, if any.
bool is_responses_route(const std::string& path);
net::awaitable<void> serve_responses_route(ServerState& st, Connection& c, http::verb method, const std::string& path,
                                           std::string_view target, std::function<ojson()> body, std::string header_id);

}  // namespace nanovllm::server
