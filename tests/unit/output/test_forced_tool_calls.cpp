// tool_choice "required" / named: what the forced tool-call grammar of a format generates, its
// parser reads back as calls only (no content), each of a listed tool with arguments that parse.
#include <gtest/gtest.h>

#include "nanovllm/output/tool_parser.h"
#include "nanovllm/structured/tool_calls.h"
#include "unit/output/tool_parser_runs.h"
#include "unit/structured/grammar_sampler.h"

using namespace nanovllm;

namespace {

std::vector<structured::ToolSpec> tools() {
  return {{"get_weather", nlohmann::ordered_json::parse(
                              R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 6},
                                  "days": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
                                  "required": ["city"]})")},
          {"now", nullptr}};
}

void expect_parser_reads_grammar(structured::ToolCallFormat format, const std::string& parser) {
  for (bool one : {true, false}) {
    const structured::Grammar g = structured::tool_calls_grammar(format, tools(), one, {});
    structured::test::GrammarSampler s(g, one ? 3 : 4);
    size_t most = 0;
    for (int i = 0; i < 200; ++i) {
      const std::string out = s.sample();
      const output::ToolDelta d = output::parser_test::run_parser(parser, {out});
      EXPECT_EQ(d.content, "") << out;
      ASSERT_FALSE(d.calls.empty()) << out;
      if (one) EXPECT_EQ(d.calls.size(), 1u) << out;
      most = std::max(most, d.calls.size());
      EXPECT_TRUE(output::parser_test::arguments_are_json_objects(d)) << out;
      for (const output::ToolCall& c : d.calls) EXPECT_TRUE(c.name == "get_weather" || c.name == "now") << out;
    }
    if (!one) EXPECT_GT(most, 1u) << parser;
  }
}

}  // namespace

TEST(ForcedToolCalls, Llama3JsonParserReadsItsGrammar) {
  expect_parser_reads_grammar(structured::ToolCallFormat::Llama3Json, "llama3_json");
}

TEST(ForcedToolCalls, HermesParserReadsItsGrammar) {
  expect_parser_reads_grammar(structured::ToolCallFormat::Hermes, "hermes");
}
