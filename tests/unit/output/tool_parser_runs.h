// Runs a tool-call parser over a text cut in every way that matters: whole, in two pieces at
// every byte, and byte by byte. The parsers must give the same content and calls for each.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/output/tool_parser.h"

namespace nanovllm::output::parser_test {

inline ToolDelta run_parser(const std::string& name, const std::vector<std::string>& pieces) {
  auto p = make_tool_parser(name);
  ToolDelta all;
  auto add = [&](ToolDelta d) {
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(c);
  };
  for (auto& s : pieces) add(p->push(s));
  add(p->finish());
  return all;
}

inline std::vector<ToolDelta> every_split(const std::string& name, const std::string& text) {
  std::vector<ToolDelta> out{run_parser(name, {text})};
  for (size_t cut = 0; cut <= text.size(); ++cut)
    out.push_back(run_parser(name, {text.substr(0, cut), text.substr(cut)}));
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  out.push_back(run_parser(name, bytes));
  return out;
}

// The calls' arguments parse as JSON objects (what the SDKs do with them).
inline bool arguments_are_json_objects(const ToolDelta& d) {
  for (const ToolCall& c : d.calls)
    if (!nlohmann::json::accept(c.arguments) || !nlohmann::json::parse(c.arguments).is_object()) return false;
  return true;
}

}  // namespace nanovllm::output::parser_test
