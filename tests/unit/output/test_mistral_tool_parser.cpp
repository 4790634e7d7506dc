// The mistral tool-call parser: [TOOL_CALLS] then a JSON array of {"name", "arguments"} (or the v11
// name{arguments} form) become calls with 9-character alphanumeric ids, whatever the split.
#include <gtest/gtest.h>

#include "nanovllm/output/tool_parser.h"
#include "unit/output/tool_parser_runs.h"

using namespace nanovllm::output;
using nanovllm::output::parser_test::arguments_are_json_objects;

namespace {
std::vector<ToolDelta> splits(const std::string& text) { return parser_test::every_split("mistral", text); }

bool mistral_id(const std::string& id) {
  if (id.size() != 9) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  return true;
}
}  // namespace

TEST(MistralToolParser, ArrayAfterTheMarker) {
  const std::string text =
      "Sure, checking.[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"note\": "
      "\"[x] \\\"]\\\"\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\", \"emoji\": \"🌦\"}}]";
  for (const ToolDelta& d : splits(text)) {
    EXPECT_EQ(d.content, "Sure, checking.");
    ASSERT_EQ(d.calls.size(), 2u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Zürich\", \"note\": \"[x] \\\"]\\\"\"}");
    EXPECT_EQ(d.calls[1].name, "get_time");
    EXPECT_EQ(d.calls[1].arguments, "{\"tz\": \"Europe/Paris\", \"emoji\": \"🌦\"}");
    EXPECT_TRUE(mistral_id(d.calls[0].id)) << d.calls[0].id;
    EXPECT_TRUE(mistral_id(d.calls[1].id)) << d.calls[1].id;
    EXPECT_NE(d.calls[0].id, d.calls[1].id);
    EXPECT_TRUE(arguments_are_json_objects(d));
  }
}

TEST(MistralToolParser, V11NameThenArguments) {
  for (const ToolDelta& d : splits("[TOOL_CALLS]get_weather{\"city\": \"Paris\"}[TOOL_CALLS]noop{}\n")) {
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 2u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(d.calls[1].name, "noop");
    EXPECT_EQ(d.calls[1].arguments, "{}");
  }
}

TEST(MistralToolParser, MalformedCallsStayContent) {
  for (const std::string text :
       {std::string("No tools needed [TOOL_ here."), std::string("[TOOL_CALLS] sorry."),
        std::string("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\"}]"),
        std::string("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}"), std::string("[TOOL_CALLS][1, 2]"),
        std::string("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"{}\"}]"), std::string("[TOOL_CALLS]f[1]"),
        std::string("[TOOL_CALLS][]")}) {
    for (const ToolDelta& d : splits(text)) {
      EXPECT_EQ(d.content, text);
      EXPECT_TRUE(d.calls.empty()) << text;
    }
  }
}

TEST(MistralToolParser, TextAroundCallsIsContent) {
  for (const ToolDelta& d : splits("A [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": null}}]\n B")) {
    EXPECT_EQ(d.content, "A \n B");
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].arguments, "{\"a\": null}");
  }
}
