// The hermes tool-call parser: <tool_call> blocks become calls whatever the streaming split, the
// arguments in json.dumps' layout; malformed blocks stay text.
#include <gtest/gtest.h>

#include "nanovllm/output/tool_parser.h"
#include "nanovllm/utils/error.h"
#include "unit/output/tool_parser_runs.h"

using namespace nanovllm::output;

namespace {

ToolDelta run(const std::vector<std::string>& pieces) { return parser_test::run_parser("hermes", pieces); }
std::vector<ToolDelta> every_split(const std::string& text) { return parser_test::every_split("hermes", text); }

}  // namespace

TEST(HermesToolParser, BlocksBecomeCalls) {
  const std::string text =
      "I will call it.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"n\": [1, "
      "2.5, true, null], \"o\": {\"a\": \"\\\"q\\\"\"}}}\n</tool_call>\n<tool_call>\n{\"name\":\"f\","
      "\"arguments\":{}}\n</tool_call>\n";
  for (const ToolDelta& d : every_split(text)) {
    EXPECT_EQ(d.content, "I will call it.\n");
    ASSERT_EQ(d.calls.size(), 2u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments,
              "{\"city\": \"Zürich\", \"n\": [1, 2.5, true, null], \"o\": {\"a\": \"\\\"q\\\"\"}}");
    EXPECT_EQ(d.calls[1].name, "f");
    EXPECT_EQ(d.calls[1].arguments, "{}");
    EXPECT_EQ(d.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
    EXPECT_EQ(d.calls[0].id.size(), std::string("chatcmpl-tool-").size() + 32);
    EXPECT_NE(d.calls[0].id, d.calls[1].id);
  }
}

TEST(HermesToolParser, MalformedBlockStaysText) {
  const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}\n</tool_call>";
  const std::string no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
  const std::string good = "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\": 1}}</tool_call>";
  for (const ToolDelta& d : every_split("a " + bad + " b " + no_name + good)) {
    EXPECT_EQ(d.content, "a " + bad + " b " + no_name);
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].name, "g");
    EXPECT_EQ(d.calls[0].arguments, "{\"x\": 1}");
  }
}

TEST(HermesToolParser, UnterminatedBlockAtTheEnd) {
  for (const ToolDelta& d : every_split("<tool_call>{\"name\": \"g\", \"arguments\": {}}")) {
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 1u);
  }
  for (const ToolDelta& d : every_split("x <tool_call>{\"name\": \"g\", \"argu")) {
    EXPECT_EQ(d.content, "x <tool_call>{\"name\": \"g\", \"argu");
    EXPECT_TRUE(d.calls.empty());
  }
}

TEST(HermesToolParser, TextWithoutCallsPassesAsItArrives) {
  HermesToolParser p;
  EXPECT_EQ(p.push("Hello <").content, "Hello ");  // "<" could start a tag
  EXPECT_EQ(p.push("b>").content, "<b>");
  EXPECT_EQ(p.push("\n").content, "\n");  // whitespace is content until a call was made
  EXPECT_EQ(p.finish().content, "");
}

TEST(HermesToolParser, DeeplyNestedArgumentsAreRefusedNotACrash) {
  const std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100000, '[') + "</tool_call>";
  ToolDelta d = run({deep});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, deep);
}

TEST(ToolParsers, UnknownNameIsAnErrorListingTheKnownOnes) {
  for (const char* name : {"hermes", "llama3_json", "mistral", "pythonic"}) {
    EXPECT_TRUE(is_tool_parser(name)) << name;
    EXPECT_NE(make_tool_parser(name), nullptr);
    EXPECT_NE(tool_parser_names().find(name), std::string::npos) << name;
  }
  EXPECT_FALSE(is_tool_parser("llama4_pythonic"));
  try {
    make_tool_parser("jamba");
    ADD_FAILURE() << "no error";
  } catch (const nanovllm::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("jamba"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama3_json, mistral, pythonic"), std::string::npos);
  }
  EXPECT_TRUE(tool_parser_keeps_special_tokens("mistral"));
  EXPECT_FALSE(tool_parser_keeps_special_tokens("hermes"));
}
