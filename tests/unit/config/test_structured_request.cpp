// A request's structured-output fields -> StructuredOutputs (vLLM's response_format,
// structured_outputs and guided_* fields), every refusal naming its field, and
// --structured-outputs-config's JSON.
#include <gtest/gtest.h>

#include "nanovllm/config/settings.h"
#include "nanovllm/config/structured_request.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;
using ojson = nlohmann::ordered_json;
using Kind = StructuredOutputs::Kind;

namespace {

StructuredRequest read(const std::string& body, const StructuredOutputsConfig& cfg = {}) {
  return read_structured_fields(ojson::parse(body), cfg);
}

// The param of the InvalidRequest that reading `body` throws (and its message in *msg), "" if none.
std::string refused(const std::string& body, std::string* msg = nullptr) {
  try {
    read(body);
  } catch (const InvalidRequest& e) {
    if (msg) *msg = e.what();
    return e.param;
  }
  return "";
}

}  // namespace

TEST(StructuredRequest, NothingAskedIsUnconstrained) {
  for (const char* body : {R"({})", R"({"response_format": {"type": "text"}})", R"({"guided_json": null})",
                           R"({"structured_outputs": {"json_object": false}})", R"({"structured_outputs": null})"}) {
    const StructuredRequest r = read(body);
    EXPECT_FALSE(r.spec.active()) << body;
    EXPECT_EQ(r.field, "") << body;
  }
}

TEST(StructuredRequest, ResponseFormat) {
  StructuredRequest r = read(R"({"response_format": {"type": "json_object"}})");
  EXPECT_EQ(r.spec.kind, Kind::JsonObject);
  EXPECT_EQ(r.field, "response_format");
  r = read(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
              "description": "a point", "schema": {"type": "object", "properties": {"y": {}, "x": {}}}}}})");
  EXPECT_EQ(r.spec.kind, Kind::JsonSchema);
  EXPECT_EQ(r.spec.text, R"({"type":"object","properties":{"y":{},"x":{}}})");  // the client's key order
  EXPECT_FALSE(r.spec.any_whitespace);                                          // our default: compact
}

TEST(StructuredRequest, StructuredOutputsKinds) {
  StructuredRequest r = read(R"({"structured_outputs": {"regex": "[a-z]+"}})");
  EXPECT_EQ(r.spec.kind, Kind::Regex);
  EXPECT_EQ(r.spec.text, "[a-z]+");
  EXPECT_EQ(r.field, "structured_outputs");
  r = read(R"({"structured_outputs": {"choice": ["yes", "no"]}})");
  EXPECT_EQ(r.spec.kind, Kind::Choice);
  EXPECT_EQ(r.spec.choices, (std::vector<std::string>{"yes", "no"}));
  r = read(R"({"structured_outputs": {"grammar": "root ::= \"a\""}})");
  EXPECT_EQ(r.spec.kind, Kind::Grammar);
  r = read(R"({"structured_outputs": {"json_object": true}})");
  EXPECT_EQ(r.spec.kind, Kind::JsonObject);
  // json as an object or as JSON text: the same compact text.
  const StructuredRequest a = read(R"({"structured_outputs": {"json": {"type": "integer"}}})");
  const StructuredRequest b = read(R"({"structured_outputs": {"json": "{ \"type\" : \"integer\" }"}})");
  EXPECT_EQ(a.spec.kind, Kind::JsonSchema);
  EXPECT_EQ(a.spec.text, b.spec.text);
  EXPECT_EQ(a.spec.cache_key(), b.spec.cache_key());
}

TEST(StructuredRequest, OlderGuidedFields) {
  EXPECT_EQ(read(R"({"guided_json": {"type": "string"}})").spec.kind, Kind::JsonSchema);
  EXPECT_EQ(read(R"({"guided_json": {"type": "string"}})").field, "guided_json");
  EXPECT_EQ(read(R"({"guided_regex": "\\d+"})").spec.text, "\\d+");
  EXPECT_EQ(read(R"({"guided_choice": ["a"]})").spec.choices, std::vector<std::string>{"a"});
  EXPECT_EQ(read(R"({"guided_grammar": "root ::= \"x\""})").field, "guided_grammar");
  for (const char* backend : {"xgrammar", "auto", "guidance", "outlines", "nanovllm"})
    EXPECT_EQ(read(std::string(R"({"guided_regex": "a", "guided_decoding_backend": ")") + backend + "\"}").spec.kind,
              Kind::Regex)
        << backend;
}

TEST(StructuredRequest, Whitespace) {
  StructuredOutputsConfig loose;
  loose.disable_any_whitespace = false;
  EXPECT_FALSE(read(R"({"guided_json": {}})").spec.any_whitespace);
  EXPECT_TRUE(read(R"({"guided_json": {}})", loose).spec.any_whitespace);
  EXPECT_FALSE(
      read(R"({"structured_outputs": {"json": {}, "disable_any_whitespace": true}})", loose).spec.any_whitespace);
  EXPECT_TRUE(read(R"({"structured_outputs": {"json": {}, "disable_any_whitespace": false}})").spec.any_whitespace);
  EXPECT_TRUE(
      read(R"({"structured_outputs": {"json_object": true, "whitespace_pattern": "[ \\n\\t]*"}})").spec.any_whitespace);
  EXPECT_TRUE(read(R"({"guided_json": {}, "guided_whitespace_pattern": "[\t\n ]*"})").spec.any_whitespace);
  // Not a JSON kind: whitespace is irrelevant and left out of the cache key.
  EXPECT_FALSE(read(R"({"guided_regex": "a"})", loose).spec.any_whitespace);
  for (const char* p : {"[ \\n\\t]*", "[\\t \\n]*", "[\\x20\\n\\t]*", "[\n\t ]*"})
    EXPECT_TRUE(is_any_whitespace_pattern(p)) << p;
  for (const char* p : {"", "[ ]*", "[ \\n]*", "[ \\n\\t\\r]*", "\\s*", "[ \\n\\t]+", "[ \\n\\t]"})
    EXPECT_FALSE(is_any_whitespace_pattern(p)) << p;
}

TEST(StructuredRequest, MoreThanOneKindIsRefusedNamingBoth) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"guided_json": {}, "guided_regex": "a"})", "guided_regex"},
      {R"({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}})",
       "structured_outputs.regex"},
      {R"({"structured_outputs": {"regex": "a", "choice": ["b"]}})", "structured_outputs.choice"},
      {R"({"structured_outputs": {"json_object": true}, "guided_choice": ["b"]})", "guided_choice"},
  };
  for (auto& [body, param] : cases) {
    std::string msg;
    EXPECT_EQ(refused(body, &msg), param) << body;
    EXPECT_NE(msg.find("only use one kind"), std::string::npos) << msg;
    EXPECT_NE(msg.find(" and "), std::string::npos) << msg;
  }
}

TEST(StructuredRequest, EveryRefusalNamesItsField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"response_format": "json"})", "response_format"},
      {R"({"response_format": {}})", "response_format"},
      {R"({"response_format": {"type": "yaml"}})", "response_format"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})", "response_format"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})", "response_format"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": 3, "schema": {}}}})",
       "response_format.json_schema.name"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}}})",
       "response_format.json_schema.schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": 1}}})",
       "response_format.json_schema.strict"},
      {R"({"response_format": {"type": "structural_tag"}})", "response_format.structural_tag"},
      {R"({"structured_outputs": []})", "structured_outputs"},
      {R"({"structured_outputs": {"json": "{not json"}})", "structured_outputs.json"},
      {R"({"structured_outputs": {"json": [1]}})", "structured_outputs.json"},
      {R"({"structured_outputs": {"regex": 5}})", "structured_outputs.regex"},
      {R"({"structured_outputs": {"regex": ""}})", "structured_outputs.regex"},
      {R"({"structured_outputs": {"choice": []}})", "structured_outputs.choice"},
      {R"({"structured_outputs": {"choice": ["a", 1]}})", "structured_outputs.choice"},
      {R"({"structured_outputs": {"json_object": "yes"}})", "structured_outputs.json_object"},
      {R"({"structured_outputs": {"structural_tag": "{}"}})", "structured_outputs.structural_tag"},
      {R"({"structured_outputs": {"whitespace_pattern": "[ ]?", "json": {}}})",
       "structured_outputs.whitespace_pattern"},
      {R"({"structured_outputs": {"json_schema": {}}})", "structured_outputs.json_schema"},
      {R"({"structured_outputs": {"backend": "xgrammar", "regex": "a"}})", "structured_outputs.backend"},
      {R"({"guided_json": 3})", "guided_json"},
      {R"({"guided_choice": "a"})", "guided_choice"},
      {R"({"guided_grammar": ""})", "guided_grammar"},
      {R"({"guided_regex": "a", "guided_decoding_backend": "lm-format-enforcer"})", "guided_decoding_backend"},
      {R"({"guided_json": {}, "guided_whitespace_pattern": "\\s*"})", "guided_whitespace_pattern"},
      {R"({"structural_tag": "{}"})", "structural_tag"},
  };
  for (auto& [body, param] : cases) {
    std::string msg;
    EXPECT_EQ(refused(body, &msg), param) << body;
    EXPECT_NE(msg.find(param.substr(param.rfind('.') + 1)), std::string::npos) << body << ": " << msg;
  }
}

TEST(StructuredOutputsConfig, ParsesVllmsKeysAndRefusesOthersByName) {
  const auto c = StructuredOutputsConfig::parse(
      R"({"backend": "xgrammar", "disable_any_whitespace": false, "disable_additional_properties": true,
          "disable_fallback": true, "enable_in_reasoning": true, "reasoning_parser": "qwen3"})",
      "--structured-outputs-config");
  EXPECT_EQ(c.backend, "xgrammar");
  EXPECT_FALSE(c.disable_any_whitespace);
  EXPECT_TRUE(c.enable_in_reasoning);
  EXPECT_EQ(c.reasoning_parser, "qwen3");
  EXPECT_EQ(StructuredOutputsConfig::parse(c.to_json(), "x").to_json(), c.to_json());
  EXPECT_TRUE(StructuredOutputsConfig::parse("{}", "x").disable_any_whitespace);  // our default
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"backend": "lm-format-enforcer"})", "lm-format-enforcer"},
      {R"({"colour": 1})", "colour"},
      {R"({"disable_any_whitespace": "no"})", "disable_any_whitespace"},
      {R"({"reasoning_parser_plugin": "x.py"})", "reasoning_parser_plugin"},
      {R"([1])", "JSON object"},
      {R"({)", "JSON object"},
  };
  for (auto& [text, named] : bad) {
    try {
      StructuredOutputsConfig::parse(text, "--structured-outputs-config");
      ADD_FAILURE() << text << " was accepted";
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("--structured-outputs-config"), std::string::npos) << msg;
      EXPECT_NE(msg.find(named), std::string::npos) << msg;
    }
  }
}

TEST(StructuredOutputsConfig, TheOlderBackendFlagSetsTheSameBackend) {
  EngineConfig cfg;
  set_setting_text(find_setting("guided_decoding_backend"), cfg, "outlines");
  EXPECT_EQ(cfg.structured_outputs_config.backend, "outlines");
  EXPECT_THROW(set_setting_text(find_setting("guided_decoding_backend"), cfg, "lmfe"), UserError);
  set_setting_text(find_setting("structured_outputs_config"), cfg, R"({"disable_any_whitespace": false})");
  EXPECT_FALSE(cfg.structured_outputs_config.disable_any_whitespace);
  EXPECT_EQ(cfg.structured_outputs_config.backend, "auto");  // the JSON replaces the whole config
}
