// The JSON Schema converter on its own: the EBNF of small schemas, strict mode and whitespace,
// numeric ranges checked by sampling (every sample in range, every value of a small range reached),
// and each refusal naming its keyword and JSON pointer. test_json_schema_oracle.cpp compares the
// languages with ajv, hyperjump and xgrammar.
#include <gtest/gtest.h>

#include <set>

#include "grammar_sampler.h"
#include "nanovllm/structured/json_schema.h"

namespace nanovllm::structured::test {
namespace {

std::string ebnf(const std::string& schema, JsonSchemaOptions opt = {}) {
  return json_schema_to_grammar(schema, opt).to_ebnf();
}

// The rule named `name` in the printed grammar ("" when absent).
std::string rule_line(const std::string& text, const std::string& name) {
  size_t at = text.find(name + " ::= ");
  if (at != 0 && at != std::string::npos && text[at - 1] != '\n') at = text.find("\n" + name + " ::= ") + 1;
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

TEST(JsonSchemaEbnf, SmallSchemas) {
  EXPECT_EQ(ebnf(R"({"enum": ["x", 1, null, {"k": [true]}]})"),
            "root ::= \"\\\"x\\\"\" | \"1\" | \"null\" | \"{\" \"\\\"k\\\"\" \": \" (\"[\" \"true\" \"]\") \"}\"\n");
  EXPECT_EQ(ebnf(R"({"type": "array", "items": {"type": "null"}, "minItems": 1, "maxItems": 3})"),
            "root ::= \"[\" (root_items (\", \" root_items){0,2}) \"]\"\nroot_items ::= \"null\"\n");
  EXPECT_EQ(rule_line(ebnf(R"({"type": "string", "minLength": 1, "maxLength": 3})"), "root"),
            "root ::= \"\\\"\" (json_char){1,3} \"\\\"\"");
  EXPECT_EQ(
      ebnf(R"({"type": "integer", "minimum": -15, "maximum": 27})"),
      "root ::= ((\"0\" | [1-8] | \"9\") | (\"1\" [0-9] | \"2\" (\"7\" | [0-6]))) | \"-\" ((\"1\" | [2-8] | \"9\") | "
      "\"1\" (\"0\" | [1-4] | \"5\"))\n");
  // const beside type: only the values the type allows
  EXPECT_EQ(ebnf(R"({"type": "string", "enum": ["a", 2, "b"]})"), "root ::= \"\\\"a\\\"\" | \"\\\"b\\\"\"\n");
}

TEST(JsonSchemaEbnf, StrictObjectsInSchemaOrder) {
  const std::string schema = R"({"type": "object", "properties": {"b": {"type": "null"}, "a": {"type": "boolean"}},
                                 "required": ["a"]})";
  std::string strict = ebnf(schema);
  // b optional then a required, nothing else: "{" then b? then a
  EXPECT_EQ(rule_line(strict, "root"), "root ::= \"{\" root_part_h0 \"}\"");
  EXPECT_EQ(rule_line(strict, "root_part_h0"),
            "root_part_h0 ::= (\"\\\"b\\\"\" \": \" root_b) root_part_t1 | root_part_h1");
  EXPECT_EQ(rule_line(strict, "root_part_h1"), "root_part_h1 ::= (\"\\\"a\\\"\" \": \" root_a) root_part_t2");
  EXPECT_EQ(rule_line(strict, "root_part_t2"), "root_part_t2 ::= \"\"");
  JsonSchemaOptions loose;
  loose.strict = false;
  std::string open = ebnf(schema, loose);
  EXPECT_NE(rule_line(open, "root_part_t2").find("json_value"), std::string::npos) << open;
  // A bare object type is any object, strict or not (as xgrammar).
  EXPECT_EQ(rule_line(ebnf(R"({"type": "object"})"), "root"), "root ::= json_object");
}

TEST(JsonSchemaEbnf, AnyWhitespace) {
  JsonSchemaOptions opt;
  opt.any_whitespace = true;
  std::string text = ebnf(R"({"type": "array", "items": {"type": "boolean"}})", opt);
  EXPECT_EQ(rule_line(text, "root"),
            "root ::= (\"[\" ([\\t-\\n ])*) (root_items ((([\\t-\\n ])* \",\" ([\\t-\\n ])*) root_items)*)? "
            "(([\\t-\\n ])* \"]\")");
}

TEST(JsonSchemaEbnf, ObjectGrammarForJsonMode) {
  Grammar g = json_object_grammar({});
  EXPECT_EQ(rule_line(g.to_ebnf(), "root"), "root ::= json_object");
  GrammarSampler s(g, 7);
  for (int i = 0; i < 50; ++i) {
    std::string t = s.sample();
    EXPECT_EQ(t.front(), '{');
    try {
      EXPECT_TRUE(nlohmann::json::parse(t).is_object()) << t;
    } catch (const nlohmann::json::out_of_range&) {  // a number past double's range: still JSON
    } catch (const nlohmann::json::parse_error& e) {
      ADD_FAILURE() << t << ": " << e.what();
    }
  }
}

// Samples of a numeric schema: all within [lo, hi]; returns the distinct texts seen.
std::set<std::string> sample_numbers(const std::string& schema, long double lo, long double hi, bool lo_excl,
                                     bool hi_excl, int n = 3000) {
  Grammar g = json_schema_to_grammar(schema, {});
  GrammarSampler s(g, 42);
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    std::string t = s.sample();
    long double v = std::stold(t);
    EXPECT_TRUE(lo_excl ? v > lo : v >= lo) << schema << ": " << t;
    EXPECT_TRUE(hi_excl ? v < hi : v <= hi) << schema << ": " << t;
    auto parsed = nlohmann::json::parse(t, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << t;
    seen.insert(t);
  }
  return seen;
}

TEST(JsonSchemaRanges, IntegersAreExactlyTheRange) {
  auto seen = sample_numbers(R"({"type": "integer", "minimum": -15, "maximum": 27})", -15, 27, false, false);
  for (int v = -15; v <= 27; ++v) EXPECT_TRUE(seen.count(std::to_string(v))) << v;
  seen =
      sample_numbers(R"({"type": "integer", "exclusiveMinimum": 98, "exclusiveMaximum": 1003})", 98, 1003, true, true);
  EXPECT_TRUE(seen.count("99") && seen.count("1002"));
  // draft-4 boolean form and fractional bounds
  seen = sample_numbers(R"({"type": "integer", "minimum": 2.5, "maximum": 5, "exclusiveMaximum": true})", 2.5, 5, false,
                        true);
  EXPECT_EQ(seen, (std::set<std::string>{"3", "4"}));
  seen = sample_numbers(R"({"type": "integer", "minimum": -3.5, "maximum": -0.5})", -3.5, -0.5, false, false);
  EXPECT_EQ(seen, (std::set<std::string>{"-3", "-2", "-1"}));
  sample_numbers(R"({"type": "integer", "minimum": 123456789012345678901234567890})", 1.2345678901234567e29L, 1e40L,
                 false, false, 200);
}

TEST(JsonSchemaRanges, DecimalsWithinBounds) {
  sample_numbers(R"({"type": "number", "minimum": -2.75, "exclusiveMaximum": 10.125})", -2.75L, 10.125L, false, true);
  sample_numbers(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 0.001})", 0, 0.001L, true, false);
  sample_numbers(R"({"type": "number", "exclusiveMaximum": -0.5})", -1e30L, -0.5L, false, true);
  auto seen = sample_numbers(R"({"type": "number", "minimum": 2.5, "maximum": 2.5})", 2.5, 2.5, false, false, 200);
  EXPECT_TRUE(seen.count("2.5"));
  EXPECT_THROW(json_schema_to_grammar(R"({"type": "number", "minimum": 3, "exclusiveMaximum": 3})", {}), GrammarError);
}

void expect_refused(const std::string& schema, const std::string& needle1, const std::string& needle2 = "") {
  try {
    json_schema_to_grammar(schema, {});
    ADD_FAILURE() << "accepted: " << schema;
  } catch (const GrammarError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(needle1), std::string::npos) << m;
    if (!needle2.empty()) EXPECT_NE(m.find(needle2), std::string::npos) << m;
  }
}

TEST(JsonSchemaRefusals, UnsupportedKeywordsNamedWithPointer) {
  expect_refused(R"({"not": {"type": "string"}})", "'not'", "'#/not'");
  expect_refused(R"({"properties": {"a": {"if": {}, "then": {}}}})", "'if'", "#/properties/a/if");
  expect_refused(R"({"dependencies": {"a": ["b"]}})", "'dependencies'");
  expect_refused(R"({"patternProperties": {"^x": {}}})", "'patternProperties'");
  expect_refused(R"({"type": "array", "uniqueItems": true})", "'uniqueItems'");
  expect_refused(R"({"type": "integer", "multipleOf": 3})", "'multipleOf'");
  expect_refused(R"({"type": "array", "contains": {"type": "integer"}})", "'contains'");
  expect_refused(R"({"type": "object", "minProperties": 1})", "'minProperties'");
  expect_refused(R"({"items": [{"maxProperties": 1}]})", "'maxProperties'", "#/items/0/maxProperties");
  expect_refused(R"({"type": "string", "format": "duration"})", "format 'duration'");
  expect_refused(R"({"$ref": "http://example.com/s.json"})", "only local references");
  expect_refused(R"({"$ref": "#/$defs/missing"})", "points to nothing");
  expect_refused(R"({"type": "strnig"})", "unknown type 'strnig'");
  expect_refused(R"({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]})", "two different 'pattern'");
  expect_refused(R"({"type": "string", "format": "date", "maxLength": 5})", "minLength / maxLength");
  expect_refused(R"({"enum": ["a"], "format": "email"})", "'format' beside 'enum'");
}

TEST(JsonSchemaRefusals, LimitsAndBadInput) {
  expect_refused(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
                 "loops without reaching a schema");
  expect_refused(R"({"$ref": "#"})", "loops without reaching a schema");
  expect_refused(R"({"type": "string", "minLength": 5, "maxLength": 2})", "no JSON value satisfies it");
  expect_refused(R"({"type": "object", "properties": {"a": false}, "required": ["a"]})", "no JSON value");
  expect_refused(R"({"type": )", "not valid JSON");
  expect_refused(R"({"minLength": -1})", "non-negative integer");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"items": )";
  deep += "{}" + std::string(100, '}');
  expect_refused(deep, "nests deeper than 64");
  JsonSchemaOptions small;
  small.max_schema_bytes = 10;
  EXPECT_THROW(json_schema_to_grammar(R"({"type": "string"})", small), GrammarError);
  // anyOf combinations multiply: 8 groups of 3 branches is 6561 > 4096
  std::string many = R"({"allOf": [)";
  for (int i = 0; i < 8; ++i)
    many += std::string(i ? "," : "") + R"({"anyOf": [{"minimum": 1}, {"maximum": 5}, {"type": "string"}]})";
  many += "]}";
  expect_refused(many, "anyOf/oneOf combinations");
}

TEST(JsonSchemaRefs, RecursionIsARuleReference) {
  std::string text =
      ebnf(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}})");
  // the root rule is referenced from inside itself rather than expanded
  EXPECT_EQ(rule_line(text, "root_next"), "root_next ::= root | root_anyOf_1") << text;
  EXPECT_EQ(rule_line(text, "root_anyOf_1"), "root_anyOf_1 ::= \"null\"") << text;
}

TEST(JsonSchemaEbnf, OrderedJsonKeepsPropertyOrder) {
  Grammar g;
  auto schema = nlohmann::ordered_json::parse(R"({"properties": {"z": {"type": "null"}, "a": {"type": "null"}}})");
  g.set_root(add_json_schema(g, schema, {}, "root"));
  std::string text = g.to_ebnf();
  EXPECT_NE(rule_line(text, "root_part_h0").find("\\\"z\\\""), std::string::npos) << text;
  EXPECT_NE(rule_line(text, "root_part_h1").find("\\\"a\\\""), std::string::npos) << text;
}

}  // namespace
}  // namespace nanovllm::structured::test
