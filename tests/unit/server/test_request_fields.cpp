// The request-field audit (vLLM's schema: implemented, refused when not default, or unknown and
// ignored) and the chat tool rules (tool_choice, the tool-call turn's arguments).
#include <gtest/gtest.h>

#include "nanovllm/server/chat_tools.h"
#include "nanovllm/server/request_fields.h"

using namespace nanovllm;
using namespace nanovllm::server;

namespace {

// The param of the ApiError `f` throws ("" when it throws none).
template <class F>
std::string refused_param(F f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  } catch (const InvalidRequest& e) {  // a 400 naming e.param (server/api_error.h)
    return e.param;
  }
  return "";
}

std::string audit_param(const ojson& body, Endpoint ep = Endpoint::ChatCompletions) {
  return refused_param([&] { audit_request_fields(body, ep); });
}

}  // namespace

TEST(RequestFields, UnimplementedFieldsAreRefusedUnlessDefault) {
  const std::vector<std::pair<std::string, ojson>> refused = {
      {"structural_tag", "{}"},
      {"use_beam_search", true},
      {"length_penalty", 0.5},
      {"truncate_prompt_tokens", 5},
      {"continue_final_message", true},
      {"spaces_between_special_tokens", false},
      {"include_reasoning", false},
      {"cache_salt", "s"},
      {"vllm_xargs", {{"a", 1}}},
  };
  for (auto& [name, value] : refused) EXPECT_EQ(audit_param({{name, value}}), name) << name;
  const std::vector<std::pair<std::string, ojson>> defaults = {
      {"response_format", {{"type", "text"}}},
      {"guided_json", nullptr},
      {"use_beam_search", false},
      {"length_penalty", 1.0},
      {"priority", 3},       // config/request_json.h reads these three
      {"bad_words", {"x"}},
      {"allowed_token_ids", {1, 2}},
      {"continue_final_message", false},
      {"add_special_tokens", false},
      {"spaces_between_special_tokens", true},
      {"include_reasoning", true},
  };
  for (auto& [name, value] : defaults) EXPECT_EQ(audit_param({{name, value}}), "") << name;
}

TEST(RequestFields, EndpointsHaveTheirOwnSchemas) {
  EXPECT_EQ(audit_param({{"suffix", "x"}}, Endpoint::Completions), "suffix");
  EXPECT_EQ(audit_param({{"add_special_tokens", true}}, Endpoint::Completions), "");  // completions' default
  // A chat-only field sent to completions is unknown there: ignored, reported.
  EXPECT_EQ(audit_request_fields({{"messages", ojson::array()}, {"prompt", "x"}}, Endpoint::Completions),
            std::vector<std::string>{"messages"});
}

TEST(RequestFields, UnknownFieldsAreReportedInOrder) {
  const ojson body = {{"model", "m"}, {"zeta", 1}, {"temperature", 0.5}, {"alpha", true}, {"stream", false}};
  EXPECT_EQ(audit_request_fields(body, Endpoint::ChatCompletions), (std::vector<std::string>{"zeta", "alpha"}));
  // Fields implemented here or by the sampling parameters are known.
  const ojson known = {
      {"logprobs", true},     {"top_logprobs", 2}, {"n", 1},           {"min_tokens", 3},
      {"chat_template", "x"}, {"request_id", "r"}, {"tools", nullptr}, {"include_stop_str_in_output", true}};
  EXPECT_TRUE(audit_request_fields(known, Endpoint::ChatCompletions).empty());
}

TEST(ChatTools, ToolChoiceRules) {
  ModelInfo plain, tools;
  tools.reasoning_parser = "qwen3";
  tools.tool_call_parser = "hermes";
  tools.enable_auto_tool_choice = true;
  const ojson with_tools = {{"tools", ojson::array({{{"type", "function"}}})}};
  // tools present: "auto" by default, which needs the flags.
  EXPECT_EQ(chat_output_parsers(with_tools, tools, true, std::nullopt).tool, "hermes");
  EXPECT_EQ(refused_param([&] { chat_output_parsers(with_tools, plain, true, std::nullopt); }), "tool_choice");
  ojson none = with_tools;
  none["tool_choice"] = "none";
  EXPECT_EQ(chat_output_parsers(none, tools, true, std::nullopt).tool, "");
  EXPECT_EQ(chat_output_parsers(none, plain, true, std::nullopt).tool, "");
  // ("required" and named functions: test_structured_fields.cpp.)
  for (ojson tc : {ojson({{"type", "function"}}), ojson({{"type", "function"}, {"function", "f"}}), ojson("always")}) {
    ojson b = with_tools;
    b["tool_choice"] = tc;
    EXPECT_EQ(refused_param([&] { chat_output_parsers(b, tools, true, std::nullopt); }), "tool_choice") << tc;
  }
  // tool_choice without tools; "required" with an empty list is "none" (vLLM).
  EXPECT_EQ(refused_param([&] {
              chat_output_parsers({{"tool_choice", "auto"}}, tools, false, std::nullopt);
            }),
            "tool_choice");
  EXPECT_EQ(
      chat_output_parsers({{"tool_choice", "required"}, {"tools", ojson::array()}}, tools, false, std::nullopt).tool,
      "");
  // No tools: nothing to parse; reasoning unless thinking is off.
  EXPECT_EQ(chat_output_parsers(ojson::object(), tools, false, std::nullopt).reasoning, "qwen3");
  EXPECT_EQ(chat_output_parsers(ojson::object(), tools, false, true).reasoning, "qwen3");
  EXPECT_EQ(chat_output_parsers(ojson::object(), tools, false, false).reasoning, "");
  EXPECT_EQ(chat_output_parsers(ojson::object(), plain, false, std::nullopt).reasoning, "");
}

