// ResponseBuilder (responses_stream.h): output items and stream events of one /v1/responses request.
#include "nanovllm/server/responses_stream.h"

#include "nanovllm/server/sse.h"

namespace nanovllm::server {

namespace {

ojson reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

ojson text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}};
}

}  // namespace

ResponseBuilder::ResponseBuilder(const ResponsesRequest& req, std::string model, int64_t prompt_tokens, bool stream)
    : req_(req), model_(std::move(model)), prompt_tokens_(prompt_tokens), stream_(stream) {}

void ResponseBuilder::event(const char* type, ojson body) {
  if (!stream_) return;
  ojson e = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : body.items()) e[k] = std::move(v);
  sse_ += "event: ";
  sse_ += type;
  sse_ += '\n';
  sse::append_event(sse_, e);
}

ojson ResponseBuilder::response(const std::string& status) const {
  auto echo = [&](const char* k) {
    auto it = req_.echo.find(k);
    return it == req_.echo.end() ? ojson(nullptr) : ojson(*it);
  };
  ojson r = {{"id", req_.id},
             {"object", "response"},
             {"created_at", req_.created_at},
             {"status", status},
             {"background", false},
             {"error", nullptr},
             {"incomplete_details", nullptr},
             {"instructions", echo("instructions")},
             {"max_output_tokens", echo("max_output_tokens")},
             {"max_tool_calls", nullptr},
             {"metadata", echo("metadata")},
             {"model", model_},
             {"output", output_},
             {"parallel_tool_calls", echo("parallel_tool_calls")},
             {"previous_response_id", echo("previous_response_id")},
             {"reasoning", echo("reasoning")},
             {"service_tier", "default"},
             {"store", req_.store},
             {"temperature", echo("temperature")},
             {"text", echo("text")},
             {"tool_choice", echo("tool_choice")},
             {"tools", echo("tools")},
             {"top_logprobs", 0},
             {"top_p", echo("top_p")},
             {"truncation", "disabled"},
             {"usage", nullptr},
             {"user", echo("user")}};
  return r;
}

ojson ResponseBuilder::snapshot() const { return final_.is_null() ? response("in_progress") : final_; }

void ResponseBuilder::open() {
  const ojson r = response("in_progress");
  event("response.created", {{"response", r}});
  event("response.in_progress", {{"response", r}});
}

void ResponseBuilder::open_item(Open kind) {
  if (open_ == kind) return;
  close_item();
  open_ = kind;
  part_text_.clear();
  const int64_t index = int64_t(output_.size());
  ojson item;
  ojson part;
  if (kind == Open::Reasoning) {
    item = {{"id", random_item_id("rs_")},
            {"type", "reasoning"},
            {"summary", ojson::array()},
            {"content", ojson::array()},
            {"status", "in_progress"}};
    part = reasoning_part("");
  } else {
    item = {{"id", random_item_id("msg_")},
            {"type", "message"},
            {"role", "assistant"},
            {"status", "in_progress"},
            {"content", ojson::array()}};
    part = text_part("");
  }
  const std::string id = item["id"];
  output_.push_back(item);
  event("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
  event("response.content_part.added",
        {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", std::move(part)}});
}

void ResponseBuilder::close_item(const char* status) {
  if (open_ == Open::None) return;
  const int64_t index = int64_t(output_.size()) - 1;
  ojson& item = output_.back();
  const std::string id = item["id"];
  const bool reasoning = open_ == Open::Reasoning;
  const ojson part = reasoning ? reasoning_part(part_text_) : text_part(part_text_);
  if (reasoning)
    event("response.reasoning_text.done",
          {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", part_text_}});
  else
    event("response.output_text.done", {{"item_id", id},
                                        {"output_index", index},
                                        {"content_index", 0},
                                        {"text", part_text_},
                                        {"logprobs", ojson::array()}});
  event("response.content_part.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  item["content"] = ojson::array({part});
  item["status"] = status;
  event("response.output_item.done", {{"output_index", index}, {"item", item}});
  open_ = Open::None;
}

void ResponseBuilder::add_call(const output::ToolCall& call) {
  close_item();
  const int64_t index = int64_t(output_.size());
  ojson item = {
      {"id", random_item_id("fc_")},        {"type", "function_call"}, {"status", "in_progress"}, {"arguments", ""},
      {"call_id", random_item_id("call_")}, {"name", call.name}};
  const std::string id = item["id"];
  event("response.output_item.added", {{"output_index", index}, {"item", item}});
  event("response.function_call_arguments.delta",
        {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
  event("response.function_call_arguments.done",
        {{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}});
  item["arguments"] = call.arguments;
  item["status"] = "completed";
  event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
}

void ResponseBuilder::add(const ChoiceEvent& e) {
  output_tokens_ += e.num_tokens;
  for (int32_t id : e.token_ids) {
    if (reasoning_ended_ || req_.reasoning_end_token < 0) break;
    ++reasoning_tokens_;
    reasoning_ended_ = id == req_.reasoning_end_token;
  }
  if (!e.reasoning.empty()) {
    open_item(Open::Reasoning);
    part_text_ += e.reasoning;
    event("response.reasoning_text.delta", {{"item_id", output_.back()["id"]},
                                            {"output_index", int64_t(output_.size()) - 1},
                                            {"content_index", 0},
                                            {"delta", e.reasoning}});
  }
  if (!e.text.empty()) {
    open_item(Open::Message);
    part_text_ += e.text;
    event("response.output_text.delta", {{"item_id", output_.back()["id"]},
                                         {"output_index", int64_t(output_.size()) - 1},
                                         {"content_index", 0},
                                         {"delta", e.text},
                                         {"logprobs", ojson::array()}});
  }
  for (auto& call : e.tool_calls) add_call(call);
  if (e.finish != FinishReason::None) finish_ = e.finish;
}

const ojson& ResponseBuilder::finish(const std::optional<ApiError>& error, bool cancelled) {
  const bool cut = finish_ == FinishReason::Length;
  close_item(cut || cancelled ? "incomplete" : "completed");
  std::string status = "completed";
  if (cancelled)
    status = "cancelled";
  else if (error)
    status = "failed";
  else if (cut)
    status = "incomplete";
  final_ = response(status);
  if (cut && !cancelled && !error) final_["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (error && !cancelled)
    final_["error"] = {{"code", error->code.empty() ? "server_error" : error->code}, {"message", error->what()}};
  bool any_reasoning = false;
  for (auto& item : output_) any_reasoning |= item["type"] == "reasoning";
  const int64_t reasoning = !any_reasoning ? 0 : reasoning_ended_ ? reasoning_tokens_ : output_tokens_;
  final_["usage"] = {{"input_tokens", prompt_tokens_},
                     {"input_tokens_details", {{"cached_tokens", 0}}},
                     {"output_tokens", output_tokens_},
                     {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
                     {"total_tokens", prompt_tokens_ + output_tokens_}};
  const char* type = status == "completed" ? "response.completed"
                     : status == "failed"  ? "response.failed"
                                           : "response.incomplete";
  event(type, {{"response", final_}});
  return final_;
}

}  // namespace nanovllm::server
