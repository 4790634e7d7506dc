// Response side of openai_protocol.h: the shapes of OpenAI's (and vLLM's) completion,
// chat-completion, stream-chunk and model-list objects.
#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

namespace {

ojson head(const ResponseMeta& m, bool chunk) {
  const bool chat = m.endpoint == Endpoint::ChatCompletions;
  const char* object = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

ojson reason(const std::string& r) { return r.empty() ? ojson(nullptr) : ojson(r); }

// The assistant message of a full chat response, with vLLM's fields: reasoning_content (null
// when none) and tool_calls (a list). With output parsers an empty content is null, as in vLLM.
ojson chat_message(const ResponseMeta& meta, const ChoiceResult& c) {
  const bool parsed = !meta.parsers.reasoning.empty() || !meta.parsers.tool.empty();
  ojson calls = ojson::array();
  for (auto& t : c.tool_calls)
    calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
  return {{"role", meta.role},
          {"content", parsed && c.text.empty() ? ojson(nullptr) : ojson(c.text)},
          {"reasoning_content", c.reasoning.empty() ? ojson(nullptr) : ojson(c.reasoning)},
          {"tool_calls", std::move(calls)}};
}

}  // namespace

std::string finish_reason_of(FinishReason r, bool called_tools) {
  if (called_tools && r != FinishReason::None && r != FinishReason::Abort) return "tool_calls";
  return finish_reason_str(r);
}

ojson stop_reason_json(const StopReason& r) {
  if (auto* id = std::get_if<int32_t>(&r)) return *id;
  if (auto* s = std::get_if<std::string>(&r)) return *s;
  return nullptr;
}

ojson chat_delta(const std::string& content, const std::string& reasoning) {
  ojson d = ojson::object();
  if (!reasoning.empty()) d["reasoning_content"] = reasoning;
  if (!content.empty()) d["content"] = content;
  return d;
}

std::vector<ojson> tool_call_fragments(const output::ToolCall& call, int index) {
  ojson head = {
      {"index", index}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}};
  ojson args = {{"index", index}, {"function", {{"arguments", call.arguments}}}};
  return {{{"tool_calls", ojson::array({std::move(head)})}}, {{"tool_calls", ojson::array({std::move(args)})}}};
}

ojson usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

ojson full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices, const ojson& usage) {
  ojson r = head(meta, false);
  ojson cs = ojson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    ojson c = {{"index", i}};
    if (meta.endpoint == Endpoint::ChatCompletions)
      c["message"] = chat_message(meta, choices[i]);
    else
      c["text"] = choices[i].text;
    if (meta.with_token_ids) c["token_ids"] = choices[i].token_ids;
    c["logprobs"] = choices[i].logprobs;
    c["finish_reason"] = reason(choices[i].finish_reason);
    c["stop_reason"] = choices[i].stop_reason;
    if (!choices[i].prompt_logprobs.is_null()) c["prompt_logprobs"] = choices[i].prompt_logprobs;
    cs.push_back(std::move(c));
  }
  r["choices"] = std::move(cs);
  r["usage"] = usage;
  return r;
}

ojson stream_chunk(const ResponseMeta& meta, int index, const ojson& delta, const std::string& finish_reason,
                   const std::vector<int32_t>& token_ids, const ojson& logprobs,
                   const std::optional<ojson>& stop_reason) {
  ojson r = head(meta, true);
  ojson c = {{"index", index}};
  if (meta.endpoint == Endpoint::ChatCompletions)
    c["delta"] = delta;
  else
    c["text"] = delta.value("content", "");
  if (meta.with_token_ids) c["token_ids"] = token_ids;
  c["logprobs"] = logprobs;
  c["finish_reason"] = reason(finish_reason);
  if (meta.endpoint == Endpoint::Completions)
    c["stop_reason"] = stop_reason.value_or(nullptr);
  else if (stop_reason)
    c["stop_reason"] = *stop_reason;
  r["choices"] = ojson::array({std::move(c)});
  return r;
}

ojson usage_chunk(const ResponseMeta& meta, const ojson& usage) {
  ojson r = head(meta, true);
  r["choices"] = ojson::array();
  r["usage"] = usage;
  return r;
}

ojson model_card(const ModelInfo& m, const std::string& id, int64_t created) {
  return {{"id", id},
          {"object", "model"},
          {"created", created},
          {"owned_by", "nanovllm"},
          {"root", m.root},
          {"parent", nullptr},
          {"max_model_len", m.max_model_len}};
}

ojson models_response(const ModelInfo& m, int64_t created) {
  ojson data = ojson::array();
  if (m.names.empty()) data.push_back(model_card(m, m.name, created));
  for (const std::string& name : m.names) data.push_back(model_card(m, name, created));
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace nanovllm::server
