// The /v1/responses routes (responses_handler.h): the request goes through the engine loop like a
// chat completion; ResponseBuilder turns its output into items and events; the store keeps it.
#include "nanovllm/server/responses_handler.h"

#include <chrono>
#include <ctime>

#include <boost/asio/this_coro.hpp>

#include "nanovllm/server/request_caps.h"
#include "nanovllm/server/request_wakeup.h"
#include "nanovllm/server/responses_stream.h"

namespace nanovllm::server {

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kPath = "/v1/responses", kPrefix = "/v1/responses/", kCancel = "/cancel";
constexpr std::string_view kSseType = "text/event-stream";  // named: no literal in co_await (GCC 12)

// A stored response whose handler leaves before the end (the client went away) is marked failed.
struct StoreOnExit {
  ServerState& st;
  const ResponsesRequest& req;
  ResponseBuilder& b;
  bool done = false;
  ~StoreOnExit() {
    if (done || !req.store) return;
    try {
      st.responses.update(req.id, b.finish(ApiError(499, "the client went away", "", "client_disconnected")),
                          req.conversation);
    } catch (...) {  // nothing to do about a failure here
    }
  }
};

net::awaitable<void> serve_create(ServerState& st, ResponsesRequest req, Connection& c) {
  GenerationRequest& g = req.gen;
  const int64_t prompt_tokens = total_prompt_tokens(g);
  Wakeup wake(co_await net::this_coro::executor);
  auto ch = st.loop.submit(std::move(g.prompts), g.params, wake.notifier(), g.parsers, req.id, g.structured_field);
  CancelOnExit cancel_on_exit{st.loop, *ch};
  wake.watch(c, *ch);
  while (!ch->admitted_or_ended())
    if (!co_await wake.wait(c, 1s)) co_return;
  if (auto err = ch->error()) throw *err;

  ResponseBuilder b(req, st.model.name, prompt_tokens, g.stream);
  if (req.store) st.responses.put(req.id, b.snapshot(), req.conversation, ch);
  StoreOnExit keep{st, req, b};
  if (g.stream) {
    const Connection::Headers no_cache{{"Cache-Control", "no-cache"}};
    if (!co_await c.start_stream(kSseType, no_cache)) co_return;
    b.open();
  }
  std::vector<ChoiceEvent> events;
  for (;;) {
    events.clear();
    const bool ended = ch->take(events);
    for (auto& e : events) b.add(e);
    if (ended) {
      const auto err = ch->error();
      const bool cancelled = err && err->code == "cancelled";
      const ojson& out = b.finish(err, cancelled);
      keep.done = true;
      if (req.store) st.responses.update(req.id, out, req.conversation);
      if (!g.stream) {
        if (err && !cancelled) throw *err;  // the router answers (and counts) it
        std::string text = json_text(out);  // named: see below
        co_await c.send_json(http::status::ok, std::move(text));
        co_return;
      }
      if (err && !cancelled) st.metrics.on_http_error(err->status);  // a stream's: its status line said 200
    }
    // Named, not a temporary: GCC 12 destroys temporaries of a co_await expression twice.
    const std::string sse = b.take_sse();
    if (g.stream && !co_await c.write_chunk(sse)) co_return;
    if (ended) break;
    if (!co_await wake.wait(c, 1s)) co_return;
  }
  co_await c.end_stream();
}

std::string id_of(const std::string& path) {
  std::string id = path.substr(kPrefix.size());
  if (id.size() > kCancel.size() && id.compare(id.size() - kCancel.size(), kCancel.size(), kCancel) == 0)
    id.resize(id.size() - kCancel.size());
  return id;
}

[[noreturn]] void not_allowed(http::verb method, const std::string& path) {
  throw ApiError(405, "method " + std::string(http::to_string(method)) + " is not allowed on " + path);
}

}  // namespace

bool is_responses_route(const std::string& path) { return path == kPath || path.rfind(kPrefix, 0) == 0; }

net::awaitable<void> serve_responses_route(ServerState& st, Connection& c, http::verb method, const std::string& path,
                                           std::string_view target, std::function<ojson()> body,
                                           std::string header_id) {
  if (path == kPath) {
    if (method != http::verb::post) not_allowed(method, path);
    auto parse = [&] {
      const ojson j = body();
      auto lookup = [&](const std::string& id) { return st.responses.conversation(id); };
      ResponsesRequest r =
          parse_responses_request(j, st.model, lookup, random_item_id("resp_"), int64_t(std::time(nullptr)));
      if (!header_id.empty()) r.gen.request_id = header_id;
      if (!r.gen.request_id.empty()) {  // vLLM: the client's request id is the response id
        check_request_id(r.gen.request_id, st.model);
        r.id = r.gen.request_id;
      }
      return r;
    };
    ResponsesRequest r = co_await st.pool.run(std::move(parse));
    co_await serve_create(st, std::move(r), c);
    co_return;
  }
  const bool cancel = path.size() > kCancel.size() && path.ends_with(kCancel);
  const std::string id = id_of(path);
  if (id.empty() || id.find('/') != std::string::npos) throw ApiError(404, "no route for " + path);
  ojson out;
  if (cancel) {
    if (method != http::verb::post) not_allowed(method, path);
    auto [response, ch] = st.responses.cancel(id);
    st.loop.cancel(*ch);
    ch->fail(ApiError(400, "the response was cancelled", "", "cancelled"));  // ends its handler's wait
    out = std::move(response);
  } else if (method == http::verb::get) {
    const std::string_view query = target.substr(std::min(target.size(), target.find('?')));
    if (query.find("stream=true") != std::string_view::npos)
      throw ApiError(400, "streaming a stored response (stream=true) is not supported: GET it without stream", "stream",
                     "unsupported_parameter");
    auto r = st.responses.get(id);
    if (!r) throw response_not_found(id);
    out = std::move(*r);
  } else if (method == http::verb::delete_) {
    if (!st.responses.erase(id)) throw response_not_found(id);
    out = {{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
  } else {
    not_allowed(method, path);
  }
  std::string text = json_text(out);
  co_await c.send_json(http::status::ok, std::move(text));
}

}  // namespace nanovllm::server
