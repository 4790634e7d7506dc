#include "nanovllm/server/generation_handler.h"

#include <chrono>
#include <ctime>

#include "nanovllm/server/sse.h"

namespace nanovllm::server {

namespace {

using namespace std::chrono_literals;

int64_t total_prompt_tokens(const GenerationRequest& r) {
  int64_t n = 0;
  for (auto& p : r.prompts) n += int64_t(p.size());
  return n;
}

// The state of one SSE response, owned by httplib's content provider (on the HTTP thread).
struct Stream {
  ServerState& st;
  std::shared_ptr<RequestChannel> ch;
  ResponseMeta meta;
  int num_choices;
  bool include_usage;
  int64_t prompt_tokens;
  int64_t completion_tokens = 0;
  bool started = false;

  // Called by httplib until sink.done(); false aborts the connection (the client is gone).
  bool next(httplib::DataSink& sink) {
    std::string out;
    const bool chat = meta.endpoint == Endpoint::ChatCompletions;
    if (!started) {  // chat streams open with the assistant role for each choice
      started = true;
      if (chat)
        for (int i = 0; i < num_choices; ++i) sse::append_event(out, stream_chunk(meta, i, {{"role", "assistant"}, {"content", ""}}, ""));
    }
    std::vector<ChoiceEvent> events;
    const bool ended = ch->wait(events, 100ms);
    for (auto& e : events) {
      completion_tokens += e.num_tokens;
      const bool last = e.finish != FinishReason::None;
      if (!e.text.empty() || (last && !chat))
        sse::append_event(out, stream_chunk(meta, e.index, {{"content", e.text}}, chat || !last ? "" : finish_reason_str(e.finish)));
      if (last && chat) sse::append_event(out, stream_chunk(meta, e.index, ojson::object(), finish_reason_str(e.finish)));
    }
    if (ended) {
      if (auto err = ch->error()) {
        st.metrics.on_http_error(err->status);
        sse::append_event(out, err->to_json());
      } else if (include_usage) {
        sse::append_event(out, usage_chunk(meta, usage_json(prompt_tokens, completion_tokens)));
      }
      sse::append_done(out);
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (ended) sink.done();
    return true;
  }
};

}  // namespace

void serve_generation(ServerState& st, GenerationRequest req, httplib::Response& res) {
  const bool chat = req.endpoint == Endpoint::ChatCompletions;
  ResponseMeta meta{req.endpoint, st.new_id(chat ? "chatcmpl-" : "cmpl-"), int64_t(std::time(nullptr)), st.model.name};
  const int n = int(req.prompts.size());
  const int64_t prompt_tokens = total_prompt_tokens(req);
  auto ch = st.loop.submit(std::move(req.prompts), req.params);

  if (req.stream) {
    auto s = std::make_shared<Stream>(Stream{st, ch, meta, n, req.include_usage, prompt_tokens});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [s](size_t, httplib::DataSink& sink) { return s->next(sink); },
        // Runs when the response ends either way; after a disconnect the request is still live
        // in the engine, and cancelling makes the loop abort it and free its KV blocks.
        [s](bool) { s->st.loop.cancel(*s->ch); });
    return;
  }

  std::vector<ChoiceResult> choices(size_t(n), ChoiceResult{});
  int64_t completion_tokens = 0;
  std::vector<ChoiceEvent> events;
  for (bool ended = false; !ended;) {
    events.clear();
    ended = ch->wait(events, 1000ms);
    for (auto& e : events) {
      choices[size_t(e.index)].text += e.text;
      completion_tokens += e.num_tokens;
      if (e.finish != FinishReason::None) choices[size_t(e.index)].finish_reason = finish_reason_str(e.finish);
    }
  }
  if (auto err = ch->error()) throw *err;
  res.set_content(full_response(meta, choices, usage_json(prompt_tokens, completion_tokens)).dump(-1, ' ', false, ojson::error_handler_t::replace),
                  "application/json");
}

}  // namespace nanovllm::server
