// The llama3_json tool-call parser: {"name", "parameters"} objects (";"-separated, optionally
// after <|python_tag|>) become calls whatever the streaming split; what is not a call stays content.
#include <gtest/gtest.h>

#include "nanovllm/output/tool_parser.h"
#include "unit/output/tool_parser_runs.h"

using namespace nanovllm::output;
using nanovllm::output::parser_test::arguments_are_json_objects;

namespace {
std::vector<ToolDelta> splits(const std::string& text) { return parser_test::every_split("llama3_json", text); }
}  // namespace

TEST(Llama3JsonToolParser, SeveralCallsSeparatedBySemicolons) {
  const std::string text =
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\", \"days\": [1, 2.5], \"q\": \"a \\\"}\\\" "
      "{\"}}; {\"name\":\"get_time\",\"arguments\":{\"tz\":\"東京\"}};{\"name\": \"noop\", \"parameters\": {}}\n";
  for (const ToolDelta& d : splits(text)) {
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 3u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Zürich\", \"days\": [1, 2.5], \"q\": \"a \\\"}\\\" {\"}");
    EXPECT_EQ(d.calls[1].name, "get_time");
    EXPECT_EQ(d.calls[1].arguments, "{\"tz\": \"東京\"}");
    EXPECT_EQ(d.calls[2].arguments, "{}");
    EXPECT_TRUE(arguments_are_json_objects(d));
    EXPECT_EQ(d.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
    EXPECT_NE(d.calls[0].id, d.calls[1].id);
  }
}

TEST(Llama3JsonToolParser, PythonTagAndLeadingWhitespace) {
  for (const ToolDelta& d : splits("\n <|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 1}}")) {
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].arguments, "{\"x\": 1}");
  }
  // Text, then the tag: the text is content.
  for (const ToolDelta& d : splits("Let me look.<|python_tag|>{\"name\": \"f\", \"parameters\": {}}")) {
    EXPECT_EQ(d.content, "Let me look.");
    ASSERT_EQ(d.calls.size(), 1u);
  }
}

TEST(Llama3JsonToolParser, PlainAnswersAndMalformedObjectsStayContent) {
  for (const std::string text :
       {std::string("The answer is {\"name\": \"f\", \"parameters\": {}}."), std::string("{\"answer\": 42}"),
        std::string("{\"name\": \"f\"}"), std::string("{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}"),
        std::string("{\"name\": 3, \"parameters\": {}}"), std::string("{\"name\": \"f\", \"parameters\": [1]}"),
        std::string("{\"name\": \"f\", \"parameters\": {oops}}"), std::string("  {\"name\": \"f\","),
        std::string("<|python_tag|>print(1)"), std::string("  \n"), std::string("")}) {
    for (const ToolDelta& d : splits(text)) {
      EXPECT_EQ(d.content, text);
      EXPECT_TRUE(d.calls.empty()) << text;
    }
  }
}

TEST(Llama3JsonToolParser, TextAfterTheCallsIsContent) {
  for (const ToolDelta& d : splits("{\"name\": \"f\", \"parameters\": {}}  and then; {\"x\": 1}")) {
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.content, "  and then; {\"x\": 1}");
  }
  for (const ToolDelta& d : splits("{\"name\": \"f\", \"parameters\": {}}; {\"bad\": 1}")) {
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.content, "; {\"bad\": 1}");
  }
}

TEST(Llama3JsonToolParser, ContentIsNotHeldBackWithoutReason) {
  auto p = make_tool_parser("llama3_json");
  EXPECT_EQ(p->push("  ").content, "");  // could still start a call
  EXPECT_EQ(p->push("Hi <|py").content, "  Hi ");
  EXPECT_EQ(p->push("x").content, "<|pyx");
  EXPECT_EQ(p->finish().content, "");
}

TEST(Llama3JsonToolParser, DeepNestingIsRefusedNotACrash) {
  const std::string deep =
      "{\"name\": \"f\", \"parameters\": " + std::string(100000, '{') + std::string(100000, '}') + "}";
  ToolDelta d = parser_test::run_parser("llama3_json", {deep});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, deep);
}
