#include "nanovllm/server/generation_handler.h"

#include <chrono>
#include <ctime>

#include <boost/asio/this_coro.hpp>

#include "nanovllm/server/openai_logprobs.h"
#include "nanovllm/server/request_wakeup.h"
#include "nanovllm/server/sse.h"

namespace nanovllm::server {

namespace {

using namespace std::chrono_literals;

// Named, not literals: GCC 12 miscompiles string literals inside co_await expressions.
constexpr std::string_view kSseType = "text/event-stream";

// The SSE text of new events: chat streams open with the response role for each choice, the
// last event of a choice carries its finish reason; reasoning and tool calls go out as vLLM
// streams them (delta.reasoning_content, delta.tool_calls fragments).
struct StreamWriter {
  ServerState& st;
  const ResponseMeta& meta;
  int num_choices;
  bool include_usage;
  bool continuous_usage;  // usage (so far) in every chunk
  int64_t prompt_tokens;
  LogprobsAssembler& extras;     // logprobs and echo (openai_logprobs.h)
  const std::string& chat_echo;  // chat echo: each choice's first content
  int64_t completion_tokens = 0;
  std::vector<int> calls_sent = std::vector<int>(size_t(num_choices), 0);  // tool calls per choice

  bool chat() const { return meta.endpoint == Endpoint::ChatCompletions; }

  void event(std::string& out, ojson chunk) const {
    if (continuous_usage) chunk["usage"] = usage_json(prompt_tokens, completion_tokens);
    sse::append_event(out, chunk);
  }

  std::string opening() const {
    std::string out;
    if (!chat()) return out;
    for (int i = 0; i < num_choices; ++i) event(out, stream_chunk(meta, i, {{"role", meta.role}, {"content", ""}}, ""));
    if (!chat_echo.empty())  // vLLM: one chunk per choice, after the roles
      for (int i = 0; i < num_choices; ++i) event(out, stream_chunk(meta, i, {{"content", chat_echo}}, ""));
    return out;
  }

  void append(std::string& out, const ChoiceEvent& e) {
    completion_tokens += e.num_tokens;
    const bool last = e.finish != FinishReason::None;
    const bool ids = meta.with_token_ids && !e.token_ids.empty();
    const auto [text, lps] = extras.stream(e);  // text with the echo; lps: null unless asked
    if (!chat()) {
      if (!text.empty() || ids || last || !lps.is_null())
        event(out, stream_chunk(meta, e.index, {{"content", text}}, last ? finish_reason_str(e.finish) : "",
                                e.token_ids, lps, stop_reason_json(e.stop_reason)));
      return;
    }
    const ojson delta = chat_delta(text, e.reasoning);
    if (!delta.empty() || ids || !lps.is_null()) event(out, stream_chunk(meta, e.index, delta, "", e.token_ids, lps));
    for (auto& call : e.tool_calls)
      for (auto& fragment : tool_call_fragments(call, calls_sent[size_t(e.index)]++))
        event(out, stream_chunk(meta, e.index, fragment, ""));
    if (last)
      event(out, stream_chunk(meta, e.index, ojson::object(), finish_reason_of(e.finish, e.called_tools), {}, nullptr,
                              stop_reason_json(e.stop_reason)));
  }

  void closing(std::string& out, const RequestChannel& ch) {
    if (auto err = ch.error()) {
      st.metrics.on_http_error(err->status);
      sse::append_event(out, err->to_json());
    } else if (include_usage) {
      sse::append_event(out, usage_chunk(meta, usage_json(prompt_tokens, completion_tokens)));
    }
    sse::append_done(out);
  }
};

}  // namespace

net::awaitable<void> serve_generation(ServerState& st, GenerationRequest req, Connection& c) {
  const bool chat = req.endpoint == Endpoint::ChatCompletions;
  const char* prefix = chat ? "chatcmpl-" : "cmpl-";
  ResponseMeta meta{req.endpoint,
                    req.request_id.empty() ? st.new_id(prefix) : prefix + req.request_id,
                    int64_t(std::time(nullptr)),
                    st.model.name,
                    st.model.token_ids_only,
                    req.parsers};
  meta.role = st.model.response_role;
  const int n = int(req.prompts.size()) * req.params.n;  // choices: n per prompt
  const int64_t prompt_tokens = total_prompt_tokens(req);
  LogprobsAssembler extras(st.model, req);
  Wakeup wake(co_await net::this_coro::executor);
  auto ch =
      st.loop.submit(std::move(req.prompts), req.params, wake.notifier(), req.parsers, meta.id, req.structured_field);
  CancelOnExit cancel_on_exit{st.loop, *ch};
  wake.watch(c, *ch);

  // No status line before the engine has taken the request: a refusal is a plain 4xx.
  while (!ch->admitted_or_ended())
    if (!co_await wake.wait(c, 1s)) co_return;
  if (auto err = ch->error()) throw *err;

  std::vector<ChoiceEvent> events;
  if (req.stream) {
    StreamWriter w{st, meta, n, req.include_usage, req.continuous_usage, prompt_tokens, extras, req.chat_echo};
    const Connection::Headers no_cache{{"Cache-Control", "no-cache"}};
    if (!co_await c.start_stream(kSseType, no_cache)) co_return;
    std::string out = w.opening();
    for (;;) {
      events.clear();
      const bool ended = ch->take(events);
      for (auto& e : events) w.append(out, e);
      if (ended) w.closing(out, *ch);
      if (!co_await c.write_chunk(out)) co_return;
      out.clear();
      if (ended) break;
      if (!co_await wake.wait(c, 1s)) co_return;
    }
    co_await c.end_stream();
    co_return;
  }

  std::vector<ChoiceResult> choices(size_t(n), ChoiceResult{});
  int64_t completion_tokens = 0;
  for (;;) {
    events.clear();
    const bool ended = ch->take(events);
    for (auto& e : events) {
      ChoiceResult& c = choices[size_t(e.index)];
      c.text += e.text;
      c.reasoning += e.reasoning;
      for (auto& call : e.tool_calls) c.tool_calls.push_back(call);
      c.token_ids.insert(c.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
      completion_tokens += e.num_tokens;
      extras.collect(e);
      if (e.finish != FinishReason::None) {
        c.finish_reason = finish_reason_of(e.finish, e.called_tools);
        c.stop_reason = stop_reason_json(e.stop_reason);
      }
    }
    if (ended) break;
    if (!co_await wake.wait(c, 1s)) co_return;
  }
  if (auto err = ch->error()) throw *err;
  extras.complete(choices);
  for (ChoiceResult& c : choices) c.text = req.chat_echo + c.text;
  co_await c.send_json(http::status::ok,
                       json_text(full_response(meta, choices, usage_json(prompt_tokens, completion_tokens))));
}

net::awaitable<void> serve_pooling(ServerState& st, PoolingRequest req, Connection& c) {
  static constexpr const char* kPrefix[] = {"embd-", "pool-", "score-", "rerank-"};
  const char* prefix = kPrefix[int(req.endpoint)];
  const std::string id = req.request_id.empty() ? st.new_id(prefix) : prefix + req.request_id;
  const int64_t created = int64_t(std::time(nullptr));
  Wakeup wake(co_await net::this_coro::executor);
  auto ch = st.loop.submit(req.prompts, req.params, wake.notifier(), {}, id);
  CancelOnExit cancel_on_exit{st.loop, *ch};
  wake.watch(c, *ch);
  std::vector<std::vector<float>> outputs(req.prompts.size());
  std::vector<ChoiceEvent> events;
  for (;;) {
    events.clear();
    const bool ended = ch->take(events);
    for (auto& e : events)
      if (e.finish != FinishReason::None) outputs[size_t(e.index)] = std::move(e.pooled);
    if (ended) break;
    if (!co_await wake.wait(c, 1s)) co_return;
  }
  if (auto err = ch->error()) throw *err;
  co_await c.send_json(http::status::ok, json_text(pooling_response(req, outputs, id, created, st.model.name)));
}

}  // namespace nanovllm::server
