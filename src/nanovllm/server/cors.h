// CORS as vLLM's server does it (Starlette's CORSMiddleware, configured by --allowed-origins,
// --allowed-methods, --allowed-headers): the headers a response to a cross-origin request carries,
// and the answer to a preflight (OPTIONS with Access-Control-Request-Method). Without
// --allowed-origins nothing is added and OPTIONS is not answered.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nanovllm/server/server_options.h"

namespace nanovllm::server {

struct CorsAnswer {
  std::vector<std::pair<std::string, std::string>> headers;  // add to the response
  bool preflight = false;                                    // answer now, without routing
  std::string refusal;                                       // preflight refused: 400 with this text
};

// `origin`: the Origin header ("" when absent, then nothing applies). For a preflight,
// `request_method` and `request_headers` are the Access-Control-Request-* headers.
CorsAnswer cors(const ServerOptions& o, std::string_view method, std::string_view origin,
                std::string_view request_method, std::string_view request_headers);

}  // namespace nanovllm::server
