// The Hermes tool-call grammar: what it generates is the block format HermesToolParser reads
// (checked at the string level: tags, newlines, one JSON object per block with the tool's name and
// arguments), one block or several as asked; bad tool lists are refused naming the tool.
#include <gtest/gtest.h>

#include "grammar_sampler.h"
#include "nanovllm/structured/tool_calls.h"

namespace nanovllm::structured::test {
namespace {

std::vector<ToolSpec> weather_tools() {
  return {{"get_weather", nlohmann::ordered_json::parse(
                              R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]})")},
          {"now", nullptr}};
}

// Splits generated output into the blocks' JSON texts; fails the test on anything else.
std::vector<nlohmann::json> blocks(const std::string& out) {
  std::vector<nlohmann::json> calls;
  const std::string open = "<tool_call>\n", close = "\n</tool_call>";
  size_t at = 0;
  while (at < out.size()) {
    if (!calls.empty()) {
      EXPECT_EQ(out[at], '\n') << out;
      ++at;
    }
    EXPECT_EQ(out.compare(at, open.size(), open), 0) << out;
    size_t end = out.find(close, at);
    EXPECT_NE(end, std::string::npos) << out;
    if (end == std::string::npos) break;
    calls.push_back(nlohmann::json::parse(out.substr(at + open.size(), end - at - open.size())));
    at = end + close.size();
  }
  return calls;
}

TEST(ToolCallsGrammar, GeneratesWhatTheHermesParserReads) {
  for (bool one : {true, false}) {
    Grammar g = hermes_tool_calls_grammar(weather_tools(), one, {});
    GrammarSampler s(g, one ? 1 : 2);
    size_t most = 0;
    for (int i = 0; i < 300; ++i) {
      std::string out = s.sample();
      auto calls = blocks(out);
      ASSERT_FALSE(calls.empty()) << out;
      if (one) EXPECT_EQ(calls.size(), 1u) << out;
      most = std::max(most, calls.size());
      for (const auto& c : calls) {
        ASSERT_TRUE(c.is_object() && c.size() == 2) << out;
        EXPECT_EQ(c.begin().key(), "arguments");  // nlohmann::json sorts; the text order is checked below
        const auto& args = c.at("arguments");
        ASSERT_TRUE(args.is_object());
        if (c.at("name") == "now") {
          EXPECT_TRUE(args.empty());
        } else {
          ASSERT_EQ(c.at("name"), "get_weather");
          ASSERT_TRUE(args.contains("city"));
          EXPECT_LE(args["city"].get<std::string>().size(), 8u * 4);
          if (args.contains("days")) EXPECT_TRUE(args["days"] >= 1 && args["days"] <= 7);
        }
      }
      EXPECT_EQ(out.compare(12, 10, "{\"name\": \""), 0) << out;
    }
    if (!one) EXPECT_GT(most, 1u);
  }
}

TEST(ToolCallsGrammar, Refusals) {
  EXPECT_THROW(hermes_tool_calls_grammar({}, false, {}), GrammarError);
  EXPECT_THROW(hermes_tool_calls_grammar({{"", nullptr}}, false, {}), GrammarError);
  EXPECT_THROW(hermes_tool_calls_grammar({{"a", nullptr}, {"a", nullptr}}, false, {}), GrammarError);
  try {
    hermes_tool_calls_grammar({{"lookup", nlohmann::ordered_json::parse(R"({"not": {}})")}}, true, {});
    ADD_FAILURE() << "accepted";
  } catch (const GrammarError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("tool 'lookup'"), std::string::npos) << m;
    EXPECT_NE(m.find("'not'"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace nanovllm::structured::test
