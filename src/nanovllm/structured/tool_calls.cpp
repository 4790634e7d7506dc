// The Hermes tool-call grammar (tool_calls.h): each tool's parameters schema becomes its own rules
// (prefix "tool<i>"), the blocks are literals around them.
#include "nanovllm/structured/tool_calls.h"

#include <set>

namespace nanovllm::structured {

Grammar hermes_tool_calls_grammar(const std::vector<ToolSpec>& tools, bool exactly_one, const JsonSchemaOptions& opt) {
  if (tools.empty()) throw GrammarError("tool calls: no tools to call");
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
    std::string head = "{\"name\": " + nlohmann::json(t.name).dump() + ", \"arguments\": ";
    calls.push_back(g.seq({g.literal(head), args, g.literal("}")}));
  }
  int32_t call =
      g.add_rule("tool_call", g.seq({g.literal("<tool_call>\n"), g.choice(calls), g.literal("\n</tool_call>")}));
  g.define(root, exactly_one ? g.ref(call) : g.seq({g.ref(call), g.star(g.seq({g.literal("\n"), g.ref(call)}))}));
  g.set_root(root);
  g.check_complete();
  return g;
}

}  // namespace nanovllm::structured
