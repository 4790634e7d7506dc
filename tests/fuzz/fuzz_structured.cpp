// libFuzzer target for the structured-output converters' text front ends. Every input is read as
// an EBNF grammar (parse_ebnf), as a regex, plain and as JSON string content (regex_to_grammar), and
// as a JSON Schema (json_schema_to_grammar). Each either gives a complete grammar or throws
// GrammarError naming the fault; nothing crashes, hangs or throws anything else. A grammar that
// converts must also print as text our parser reads back to the same print (Grammar::to_ebnf's round
// trip), and compile into automata (build_automaton, a small state limit) or be refused by name.
// Build and run: scripts/fuzz.sh structured (seeds in tests/fuzz/corpus/structured).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nanovllm/structured/automaton.h"
#include "nanovllm/structured/ebnf.h"
#include "nanovllm/structured/json_schema.h"
#include "nanovllm/structured/regex.h"

namespace {

using nanovllm::structured::Grammar;

void check_round_trip(const Grammar& g, const char* what) {
  g.check_complete();
  const std::string printed = g.to_ebnf();
  const std::string again = nanovllm::structured::parse_ebnf(printed, g.rule(g.root()).name).to_ebnf();
  if (again != printed) {
    std::fprintf(stderr, "%s: the printed grammar reads back differently:\n%s\n---\n%s\n", what, printed.c_str(),
                 again.c_str());
    std::abort();
  }
}

template <typename F>
void expect_grammar_or_error(const char* what, F&& convert) {
  try {
    Grammar g = convert();
    check_round_trip(g, what);
    nanovllm::structured::AutomatonLimits limits;
    limits.max_states = 2000;  // the fuzzer's inputs stay fast; the engine's limits are larger
    limits.max_work = 1'000'000;
    nanovllm::structured::build_automaton(g, limits);
  } catch (const nanovllm::structured::GrammarError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: an exception other than GrammarError: %s\n", what, e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_grammar_or_error("ebnf", [&] { return nanovllm::structured::parse_ebnf(text); });
  for (bool json : {false, true}) {
    nanovllm::structured::RegexOptions opt;
    opt.json_string_content = json;
    expect_grammar_or_error(json ? "regex (json)" : "regex",
                            [&] { return nanovllm::structured::regex_to_grammar(text, opt); });
  }
  expect_grammar_or_error("json schema", [&] {
    return nanovllm::structured::json_schema_to_grammar(text, nanovllm::structured::JsonSchemaOptions{});
  });
  return 0;
}
