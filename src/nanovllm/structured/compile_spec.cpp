// A request's StructuredOutputs -> its grammar (the converter for its kind) -> compiled, cached.
#include <chrono>

#include "nanovllm/structured/compiled_grammar.h"
#include "nanovllm/structured/compiler.h"
#include "nanovllm/structured/ebnf.h"
#include "nanovllm/structured/json_schema.h"
#include "nanovllm/structured/regex.h"

namespace nanovllm::structured {

Grammar build_grammar(const StructuredOutputs& spec, const CompileLimits& limits) {
  spec.validate();
  size_t size = spec.text.size();
  for (const std::string& c : spec.choices) size += c.size() + 1;
  if (size > limits.max_input_bytes)
    throw GrammarError(std::string("the ") + structured_kind_name(spec.kind) + " text is " + std::to_string(size) +
                       " bytes, more than the limit of " + std::to_string(limits.max_input_bytes));
  JsonSchemaOptions json;
  json.any_whitespace = spec.any_whitespace;
  json.max_depth = limits.max_schema_depth;
  switch (spec.kind) {
    case StructuredOutputs::Kind::JsonSchema: return json_schema_to_grammar(spec.text, json);
    case StructuredOutputs::Kind::JsonObject: return json_object_grammar(json);
    case StructuredOutputs::Kind::Regex: return regex_to_grammar(spec.text);
    case StructuredOutputs::Kind::Grammar: return parse_ebnf(spec.text);
    case StructuredOutputs::Kind::Choice: {
      Grammar g;
      std::vector<int32_t> alts;
      for (const std::string& c : spec.choices) alts.push_back(g.literal(c));
      g.set_root(g.add_rule("root", g.choice(alts)));
      return g;
    }
    case StructuredOutputs::Kind::None: break;
  }
  throw GrammarError("no structured output was requested");
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const StructuredOutputs& spec) {
  const std::string key = spec.cache_key();
  if (auto hit = cached(key)) return hit;
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const CompiledGrammar> g;
  try {
    g = compile(build_grammar(spec, limits_));
  } catch (const GrammarError& e) {
    throw InvalidRequest("structured_outputs",
                         std::string("invalid ") + structured_kind_name(spec.kind) + ": " + e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (seconds > limits_.max_compile_seconds)
    throw InvalidRequest("structured_outputs", std::string("the ") + structured_kind_name(spec.kind) + " took " +
                                                   std::to_string(seconds) + " s to compile, more than the limit");
  remember(key, g);
  return g;
}

}  // namespace nanovllm::structured
