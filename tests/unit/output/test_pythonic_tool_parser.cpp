// The pythonic tool-call parser: a Python list of calls with literal keyword arguments becomes
// calls with JSON arguments, whatever the split; anything that is not literal stays content.
#include <gtest/gtest.h>

#include "nanovllm/output/python_calls.h"
#include "nanovllm/output/tool_parser.h"
#include "unit/output/tool_parser_runs.h"

using namespace nanovllm::output;
using nanovllm::output::parser_test::arguments_are_json_objects;

namespace {
std::vector<ToolDelta> splits(const std::string& text) { return parser_test::every_split("pythonic", text); }
}  // namespace

TEST(PythonicToolParser, ListOfCalls) {
  const std::string text =
      "\n[get_weather(city='Zürich', days=[1, -2, 3.5, 1e3], metric=True, extra=None, opts={'a': \"x]'\", "
      "\"b\": {'c': []}}), get_time(tz=\"東京\\n\\u00e9\\x41\"), noop()]\n";
  for (const ToolDelta& d : splits(text)) {
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 3u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments,
              "{\"city\": \"Zürich\", \"days\": [1, -2, 3.5, 1000.0], \"metric\": true, \"extra\": null, \"opts\": "
              "{\"a\": \"x]'\", \"b\": {\"c\": []}}}");
    EXPECT_EQ(d.calls[1].name, "get_time");
    EXPECT_EQ(d.calls[1].arguments, "{\"tz\": \"東京\\néA\"}");
    EXPECT_EQ(d.calls[2].name, "noop");
    EXPECT_EQ(d.calls[2].arguments, "{}");
    EXPECT_TRUE(arguments_are_json_objects(d));
    EXPECT_EQ(d.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  }
}

TEST(PythonicToolParser, WhatIsNotALiteralCallStaysContent) {
  for (const std::string text :
       {std::string("[f(x)]"), std::string("[f(a=b)]"), std::string("[f(a=g())]"), std::string("[f(a=1+2)]"),
        std::string("[f(a=f'{x}')]"), std::string("[f(a='x' 'y')]"), std::string("[f(a=1, a=2)]"),
        std::string("[f(a=1)"), std::string("[1, 2]"), std::string("[]"), std::string("[f(a=(1, 2))]"),
        std::string("[f(a={1: 2})]"), std::string("[f(a='''x''')]"), std::string("[f.g(a=1)]"),
        std::string("[f(a=99999999999999999999)]"), std::string("[Note] see above"), std::string("   ")}) {
    for (const ToolDelta& d : splits(text)) {
      EXPECT_EQ(d.content, text);
      EXPECT_TRUE(d.calls.empty()) << text;
    }
  }
}

TEST(PythonicToolParser, OnlyAnAnswerStartingWithTheListIsCalls) {
  const std::string call = "[f(a=1)]";
  for (const ToolDelta& d : splits("Sure: " + call)) {
    EXPECT_EQ(d.content, "Sure: " + call);
    EXPECT_TRUE(d.calls.empty());
  }
  for (const ToolDelta& d : splits(call + " done")) {
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.content, " done");
  }
}

TEST(PythonicToolParser, PlainTextIsNotHeldBack) {
  auto p = make_tool_parser("pythonic");
  EXPECT_EQ(p->push(" ").content, "");
  EXPECT_EQ(p->push("Hello").content, " Hello");
  EXPECT_EQ(p->push(" [x]").content, " [x]");
}

TEST(PythonCalls, DeepNestingAndEscapes) {
  EXPECT_FALSE(parse_python_calls("[f(a=" + std::string(100000, '[') + std::string(100000, ']') + ")]"));
  auto ok = parse_python_calls("[f(a='\\'q\\'', b=\"\\101\\d\", c=.5, d=2., e=1_000, f=[1,],)]");
  ASSERT_TRUE(ok);
  EXPECT_EQ(python_json_dumps((*ok)[0].arguments),
            "{\"a\": \"'q'\", \"b\": \"A\\\\d\", \"c\": 0.5, \"d\": 2.0, \"e\": 1000, \"f\": [1]}");
  EXPECT_FALSE(parse_python_calls("[f(a='\\ud800')]"));  // a lone surrogate
  EXPECT_FALSE(parse_python_calls("[f(a=1e999)]"));      // not finite
}
