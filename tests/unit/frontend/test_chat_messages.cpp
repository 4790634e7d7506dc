// frontend/chat_messages.h: OpenAI chat messages -> the chat template's input, as the server and the
// Python package give them (content parts joined, null content "", tool-call arguments parsed,
// errors naming the field).
#include <gtest/gtest.h>

#include "nanovllm/frontend/chat_messages.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

using ojson = nlohmann::ordered_json;

template <class F>
std::string refused_param(F f) {
  try {
    f();
  } catch (const InvalidRequest& e) {
    return e.param;
  }
  return "";
}

TEST(ChatMessages, ContentPartsNullContentAndKeyOrder) {
  const ojson in = ojson::parse(R"([{"role": "user", "z": 1, "content": [{"type": "text", "text": "a"},
      {"type": "text", "text": "b"}]}, {"role": "assistant", "content": null}])");
  const ojson out = chat_template_messages(in);
  EXPECT_EQ(out[0]["content"], "a\nb");
  EXPECT_EQ(out[0].begin().key(), "role");  // order kept
  EXPECT_EQ(out[1]["content"], "");
  EXPECT_EQ(refused_param([] { chat_template_messages(ojson::array()); }), "messages");
  EXPECT_EQ(refused_param([] { chat_template_messages(ojson::parse(R"([{"content": "x"}])")); }), "messages[0].role");
  EXPECT_EQ(refused_param([] {
              chat_template_messages(ojson::parse(R"([{"role": "user", "content": [{"type": "image_url"}]}])"));
            }),
            "messages[0].content");
  EXPECT_EQ(refused_param([] { chat_template_messages(ojson::parse(R"([{"role": "user", "content": 3}])")); }),
            "messages[0].content");
}

TEST(ChatMessages, ToolCallArgumentsGivenAsStringsAreParsed) {
  ojson msg = ojson::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": [1, 2]}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"y": 1}}}]})");
  prepare_tool_calls(msg, "messages[1]");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"x": [1, 2]})"));
  EXPECT_EQ(msg["tool_calls"][1]["function"]["arguments"], ojson::parse(R"({"y": 1})"));
  ojson bad = ojson::parse(R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]})");
  EXPECT_EQ(refused_param([&] { prepare_tool_calls(bad, "messages[1]"); }),
            "messages[1].tool_calls[0].function.arguments");
  ojson no_name = ojson::parse(R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})");
  EXPECT_EQ(refused_param([&] { prepare_tool_calls(no_name, "messages[0]"); }),
            "messages[0].tool_calls[0].function.name");
}

TEST(ChatMessages, TemplateKwargs) {
  ChatTemplateInputs in;
  apply_chat_template_kwargs(ojson::parse(R"({"enable_thinking": false, "x": [1]})"), in);
  EXPECT_EQ(in.enable_thinking, false);
  EXPECT_EQ(in.extra["x"], ojson::parse("[1]"));
  EXPECT_EQ(refused_param([&] { apply_chat_template_kwargs(ojson::parse(R"({"enable_thinking": 1})"), in); }),
            "chat_template_kwargs.enable_thinking");
}

}  // namespace
}  // namespace nanovllm
