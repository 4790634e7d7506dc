#include "nanovllm/server/chat_tools.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/server/request_field_errors.h"

namespace nanovllm::server {

namespace {

using fields::bad;

}  // namespace

output::OutputParsers chat_output_parsers(const ojson& body, const ModelInfo& m, bool has_tools,
                                          std::optional<bool> enable_thinking, StructuredOutputs* forced) {
  output::OutputParsers p;
  if (enable_thinking != false) p.reasoning = m.reasoning_parser;
  auto tc = body.find("tool_choice");
  std::string choice = has_tools ? "auto" : "none";
  std::string named;  // tool_choice naming a function
  if (tc != body.end() && !tc->is_null()) {
    if (tc->is_object()) {
      if (!has_tools) bad("tool_choice", "When using `tool_choice`, `tools` must be set.");
      const auto fn = tc->find("function");
      if (tc->value("type", ojson()) != "function" || fn == tc->end() || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string())
        bad("tool_choice",
            "tool_choice naming a function must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      named = (*fn)["name"].get<std::string>();
      choice = "named";
    } else if (!tc->is_string() || (*tc != "none" && *tc != "auto" && *tc != "required")) {
      bad("tool_choice", "Invalid value for `tool_choice`: " + tc->dump() +
                             "! Only named tools, \"none\", \"auto\" or \"required\" are supported.");
    } else {
      choice = tc->get<std::string>();
    }
    // vLLM: "required" with an empty tool list behaves as "none".
    if (choice == "required" && !has_tools && body.contains("tools") && body["tools"].is_array()) choice = "none";
  }
  if (choice == "none") return p;
  if (!has_tools) bad("tool_choice", "When using `tool_choice`, `tools` must be set.");
  if (choice == "auto") {
    if (!m.enable_auto_tool_choice || m.tool_call_parser.empty())
      bad("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
    p.tool = m.tool_call_parser;
    return p;
  }
  // "required" or a named function: the output is constrained to tool calls the parser reads.
  if (m.tool_call_parser != "hermes" && m.tool_call_parser != "llama3_json")
    bad("tool_choice",
        "tool_choice " + (named.empty() ? std::string("\"required\"") : "naming a function") +
            " needs the server started with --tool-call-parser hermes or llama3_json (the formats its "
            "output can be constrained to)" +
            (m.tool_call_parser.empty() ? "" : "; not " + m.tool_call_parser),
        "unsupported_parameter");
  p.tool = m.tool_call_parser;
  const StructuredOutputs grammar = tool_choice_grammar(m.tool_call_parser, body.at("tools"), named, m);
  if (forced) *forced = grammar;
  return p;
}

}  // namespace nanovllm::server
