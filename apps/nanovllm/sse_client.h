// One streamed OpenAI completion over HTTP/1.1 (Boost.Beast, blocking, one connection), timed the
// way `vllm bench serve` times it: when the request went out, when each server-sent event carrying
// generated text or token ids arrived, and when the stream ended. Used by `nanovllm bench-serve`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm::cli {

// Where requests go: http://host:port with an optional path prefix (e.g. "/v1" is appended by the
// caller); https is not supported.
struct HttpEndpoint {
  std::string host, port, prefix;
  std::string api_key;  // sent as "Authorization: Bearer KEY" when not empty
  double timeout_s = 600;

  // Parses "http://host[:port][/prefix]"; throws UserError naming what is wrong.
  static HttpEndpoint parse(const std::string& url);
};

struct StreamTiming {
  bool ok = false;
  std::string error;          // why not ok: connection, HTTP status and body, malformed event
  double ttft_s = 0;          // request sent -> first event with generated output
  double latency_s = 0;       // request sent -> end of the stream
  std::vector<double> itl_s;  // gaps between consecutive events with generated output
  int64_t output_tokens = 0;  // usage.completion_tokens of the final event (else the output events)
  int64_t prompt_tokens = 0;  // usage.prompt_tokens
};

// POSTs `body` (a JSON request with "stream": true and stream_options.include_usage) to
// ep.prefix + path and reads the SSE stream to its end. Never throws: failures come back in .error.
StreamTiming stream_completion(const HttpEndpoint& ep, const std::string& path, const std::string& body);

// GETs ep.prefix + path and returns the body; throws UserError when the server cannot be reached or
// answers with an error status.
std::string http_get(const HttpEndpoint& ep, const std::string& path);

}  // namespace nanovllm::cli
