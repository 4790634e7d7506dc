// The response side of /v1/responses: one builder turns a request's output (ChoiceEvents: text,
// reasoning, complete tool calls, the finish) into output items, and, when streaming, into the
// OpenAI SDK's event sequence with sequence numbers:
//   response.created, response.in_progress,
//   per item: response.output_item.added, then
//     reasoning: response.content_part.added (reasoning_text), response.reasoning_text.delta...,
//                response.reasoning_text.done, response.content_part.done
//     message:   response.content_part.added (output_text), response.output_text.delta...,
//                response.output_text.done, response.content_part.done
//     function_call: response.function_call_arguments.delta, response.function_call_arguments.done
//   response.output_item.done; at the end response.completed, response.incomplete (cut by
//   max_output_tokens, or cancelled) or response.failed.
// The streamed and the returned response are built by the same calls, so they agree item for item.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/server/request_channel.h"
#include "nanovllm/server/responses_protocol.h"

namespace nanovllm::server {

class ResponseBuilder {
 public:
  // `stream`: keep the SSE text of the events (take it with take_sse); otherwise only the items.
  ResponseBuilder(const ResponsesRequest& req, std::string model, int64_t prompt_tokens, bool stream);

  // response.created and response.in_progress.
  void open();
  // One event of the request's only choice.
  void add(const ChoiceEvent& e);
  // Closes the open item and builds the final response: status "completed", "incomplete"
  // (finish length: incomplete_details.reason max_output_tokens), "cancelled" or "failed" (with
  // `error`); streams its terminal event.
  const ojson& finish(const std::optional<ApiError>& error = std::nullopt, bool cancelled = false);

  // The response object now: status in_progress with the items so far, or the final one.
  ojson snapshot() const;
  std::string take_sse() { return std::exchange(sse_, {}); }
  const ojson& output() const { return output_; }

 private:
  enum class Open { None, Reasoning, Message };
  void event(const char* type, ojson body);
  void open_item(Open kind);
  void close_item(const char* status = "completed");
  void add_call(const output::ToolCall& call);
  ojson response(const std::string& status) const;

  const ResponsesRequest& req_;
  std::string model_;
  int64_t prompt_tokens_;
  bool stream_;
  std::string sse_;
  int64_t seq_ = 0;
  ojson output_ = ojson::array();  // items done, and the open one last
  Open open_ = Open::None;
  std::string part_text_;  // the open item's text so far
  int64_t output_tokens_ = 0;
  int64_t reasoning_tokens_ = 0;
  bool reasoning_ended_ = false;  // the reasoning end tag was generated
  FinishReason finish_ = FinishReason::None;
  ojson final_;
};

}  // namespace nanovllm::server
