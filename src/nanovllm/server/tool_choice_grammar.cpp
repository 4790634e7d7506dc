// tool_choice "required" / a named function with --tool-call-parser hermes or llama3_json: the
// request's tools -> the grammar of that parser's tool calls (structured/tool_calls.h builds it),
// given to the engine as an EBNF grammar, so that the output is calls the parser turns into tool_calls.
#include <set>

#include "nanovllm/server/chat_tools.h"
#include "nanovllm/structured/tool_calls.h"

namespace nanovllm::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param, "invalid_value");
}

struct Tool {
  std::string name;
  ojson parameters;  // {} when the tool has none
};

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
std::vector<Tool> read_tools(const ojson& tools) {
  std::vector<Tool> out;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ojson& t = tools[i];
    const auto fn = t.is_object() ? t.find("function") : t.end();
    if (!t.is_object() || fn == t.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      bad(at, at + " must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}");
    Tool tool{(*fn)["name"].get<std::string>(), ojson::object()};
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) bad(at + ".function.parameters", at + ".function.parameters must be a JSON Schema object");
      tool.parameters = *p;
    }
    if (!names.insert(tool.name).second) bad(at, "two tools are named '" + tool.name + "'");
    out.push_back(std::move(tool));
  }
  return out;
}

}  // namespace

StructuredOutputs tool_choice_grammar(const std::string& parser, const ojson& tools, const std::string& only,
                                      const ModelInfo& m) {
  std::vector<Tool> all = read_tools(tools);
  if (!only.empty()) {
    std::vector<Tool> one;
    for (Tool& t : all)
      if (t.name == only) one.push_back(std::move(t));
    if (one.empty()) bad("tool_choice", "Tool '" + only + "' has not been passed in `tools`.");
    all = std::move(one);
  }
  std::vector<structured::ToolSpec> specs;
  for (const Tool& t : all) specs.push_back({t.name, t.parameters});  // ordered: arguments in schema order
  structured::JsonSchemaOptions opt;
  opt.any_whitespace = !m.structured.disable_any_whitespace;
  StructuredOutputs so;
  so.kind = StructuredOutputs::Kind::Grammar;
  try {
    const auto format =
        parser == "llama3_json" ? structured::ToolCallFormat::Llama3Json : structured::ToolCallFormat::Hermes;
    so.text = structured::tool_calls_grammar(format, specs, !only.empty(), opt).to_ebnf();
  } catch (const structured::GrammarError& e) {
    bad("tools", std::string("tools: ") + e.what());
  }
  return so;
}

}  // namespace nanovllm::server
