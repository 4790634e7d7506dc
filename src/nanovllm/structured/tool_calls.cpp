// The tool-call grammars (tool_calls.h): each tool's parameters schema becomes its own rules
// (prefix "tool<i>"), the call's format literals around them.
#include "nanovllm/structured/tool_calls.h"

#include <set>

namespace nanovllm::structured {

namespace {

struct Format {
  std::string_view open, close, separator, arguments_key;
};

Format format_of(ToolCallFormat f) {
  if (f == ToolCallFormat::Llama3Json) return {"", "", "; ", "parameters"};
  return {"<tool_call>\n", "\n</tool_call>", "\n", "arguments"};
}

}  // namespace

Grammar tool_calls_grammar(ToolCallFormat format, const std::vector<ToolSpec>& tools, bool exactly_one,
                           const JsonSchemaOptions& opt) {
  if (tools.empty()) throw GrammarError("tool calls: no tools to call");
  const Format f = format_of(format);
  Grammar g;
  int32_t root = g.add_rule("root");
  std::set<std::string> seen;
  std::vector<int32_t> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& t = tools[i];
    if (t.name.empty()) throw GrammarError("tool calls: tool #" + std::to_string(i) + " has no name");
    if (!seen.insert(t.name).second) throw GrammarError("tool calls: tool '" + t.name + "' is listed twice");
    int32_t args;
    if (t.parameters.is_null()) {
      args = g.literal("{}");
    } else {
      try {
        args = g.ref(add_json_schema(g, t.parameters, opt, "tool" + std::to_string(i)));
      } catch (const GrammarError& e) {
        throw GrammarError("tool '" + t.name + "' parameters: " + e.what());
      }
    }
    std::string head = "{\"name\": " + nlohmann::json(t.name).dump() + ", \"" + std::string(f.arguments_key) + "\": ";
    calls.push_back(g.seq({g.literal(head), args, g.literal("}")}));
  }
  std::vector<int32_t> parts;  // open, the call, close (llama3_json has neither)
  if (!f.open.empty()) parts.push_back(g.literal(std::string(f.open)));
  parts.push_back(g.choice(calls));
  if (!f.close.empty()) parts.push_back(g.literal(std::string(f.close)));
  int32_t call = g.add_rule("tool_call", g.seq(parts));
  g.define(root, exactly_one ? g.ref(call)
                             : g.seq({g.ref(call), g.star(g.seq({g.literal(std::string(f.separator)), g.ref(call)}))}));
  g.set_root(root);
  g.check_complete();
  return g;
}

}  // namespace nanovllm::structured
