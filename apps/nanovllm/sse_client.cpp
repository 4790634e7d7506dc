// Streamed completions over HTTP/1.1 with Boost.Beast (see sse_client.h).
#include "sse_client.h"

#include <chrono>

#include "nanovllm/utils/error.h"

#ifndef NANOVLLM_NO_HTTP_SERVER
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#endif

namespace nanovllm::cli {

HttpEndpoint HttpEndpoint::parse(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) throw UserError("--base-url " + url + ": https is not supported, use http://");
  if (url.rfind(scheme, 0) != 0) throw UserError("--base-url " + url + ": expected http://HOST[:PORT][/PREFIX]");
  std::string rest = url.substr(scheme.size());
  HttpEndpoint ep;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    ep.prefix = rest.substr(slash);
    rest.resize(slash);
    while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  ep.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  ep.port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  if (ep.host.empty()) throw UserError("--base-url " + url + ": no host");
  if (ep.port.empty() || ep.port.find_first_not_of("0123456789") != std::string::npos || ep.port.size() > 5 ||
      std::stoi(ep.port) < 1 || std::stoi(ep.port) > 65535)
    throw UserError("--base-url " + url + ": the port must be a number in 1..65535");
  return ep;
}

#ifdef NANOVLLM_NO_HTTP_SERVER

StreamTiming stream_completion(const HttpEndpoint&, const std::string&, const std::string&) {
  StreamTiming t;
  t.error = "this build has no HTTP client (Boost 1.81 was not found at configure time)";
  return t;
}

std::string http_get(const HttpEndpoint&, const std::string&) {
  throw UserError("this build has no HTTP client (Boost 1.81 was not found at configure time)");
}

#else

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void connect(beast::tcp_stream& stream, net::io_context& ioc, const HttpEndpoint& ep) {
  tcp::resolver resolver(ioc);
  stream.expires_after(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(ep.timeout_s)));
  stream.connect(resolver.resolve(ep.host, ep.port));
}

template <class Body>
void set_headers(http::request<Body>& req, const HttpEndpoint& ep) {
  req.set(http::field::host, ep.host);
  req.set(http::field::user_agent, "nanovllm-bench-serve");
  if (!ep.api_key.empty()) req.set(http::field::authorization, "Bearer " + ep.api_key);
}

// The state of one stream's server-sent events: whole events are cut at blank lines.
struct EventReader {
  StreamTiming& t;
  Clock::time_point sent, last_output;
  int64_t output_events = 0;
  bool done = false;

  // Feeds received bytes; returns false (with t.error set) on a malformed event.
  bool feed(std::string& pending, Clock::time_point now) {
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (!on_event(event, now)) return false;
    }
    return true;
  }

  bool on_event(const std::string& event, Clock::time_point now) {
    for (size_t pos = 0; pos < event.size();) {
      size_t eol = event.find('\n', pos);
      if (eol == std::string::npos) eol = event.size();
      const std::string line = event.substr(pos, eol - pos);
      pos = eol + 1;
      if (line.rfind("data:", 0) != 0) continue;
      std::string data = line.substr(5);
      if (!data.empty() && data[0] == ' ') data.erase(0, 1);
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      const auto j = nlohmann::json::parse(data, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        t.error = "malformed server-sent event: " + data.substr(0, 200);
        return false;
      }
      if (j.contains("error")) {
        t.error = "error event: " + data.substr(0, 300);
        return false;
      }
      if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
        t.output_tokens = u->value("completion_tokens", int64_t(0));
        t.prompt_tokens = u->value("prompt_tokens", int64_t(0));
      }
      bool output = false;
      if (const auto c = j.find("choices"); c != j.end() && c->is_array())
        for (const auto& ch : *c) {
          const auto text = ch.find("text");
          const auto ids = ch.find("token_ids");
          output |= (text != ch.end() && text->is_string() && !text->get_ref<const std::string&>().empty()) ||
                    (ids != ch.end() && ids->is_array() && !ids->empty());
        }
      if (output) {
        if (output_events == 0)
          t.ttft_s = seconds(sent, now);
        else
          t.itl_s.push_back(seconds(last_output, now));
        last_output = now;
        ++output_events;
      }
    }
    return true;
  }
};

}  // namespace

StreamTiming stream_completion(const HttpEndpoint& ep, const std::string& path, const std::string& body) {
  StreamTiming t;
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    connect(stream, ioc, ep);
    http::request<http::string_body> req{http::verb::post, ep.prefix + path, 11};
    set_headers(req, ep);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
    req.body() = body;
    req.prepare_payload();
    EventReader events{t, Clock::now(), {}};
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(stream, buf, parser);
    const unsigned status = parser.get().result_int();
    std::string pending;
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      beast::error_code ec;
      http::read_some(stream, buf, parser, ec);  // returns as soon as bytes arrive (read() would wait to fill `chunk`)
      if (ec == http::error::need_buffer) ec = {};
      if (ec) throw beast::system_error(ec);
      pending.append(chunk, sizeof chunk - parser.get().body().size);
      if (status == 200 && !events.feed(pending, Clock::now())) return t;
    }
    const auto end = Clock::now();
    if (status != 200) {
      t.error = "HTTP " + std::to_string(status) + ": " + pending.substr(0, 300);
      return t;
    }
    if (!events.feed(pending, end)) return t;
    if (!events.done) {
      t.error = "the stream ended without data: [DONE]";
      return t;
    }
    if (events.output_events == 0) {
      t.error = "the stream carried no generated output";
      return t;
    }
    if (t.output_tokens == 0) t.output_tokens = events.output_events;
    t.latency_s = seconds(events.sent, end);
    t.ok = true;
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  } catch (const std::exception& e) {
    t.ok = false;
    t.error = e.what();
  }
  return t;
}

std::string http_get(const HttpEndpoint& ep, const std::string& path) {
  const std::string url = "http://" + ep.host + ":" + ep.port + ep.prefix + path;
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    connect(stream, ioc, ep);
    http::request<http::empty_body> req{http::verb::get, ep.prefix + path, 11};
    set_headers(req, ep);
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(stream, buf, res);
    if (res.result_int() != 200)
      throw UserError("GET " + url + ": HTTP " + std::to_string(res.result_int()) + ": " + res.body().substr(0, 300));
    return res.body();
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError("GET " + url + ": " + e.what());
  }
}

#endif

}  // namespace nanovllm::cli
