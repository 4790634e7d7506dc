// The JSON Schema converter against independent references (tests/oracles/json_schema_oracle.mjs,
// one node run per change of the request): every JSON-Schema-Test-Suite draft-4 case (and the
// optional format cases) and every schema in tests/fixtures/json_schemas/schemas.json.
//  - Each instance, written the way our grammar orders values, is accepted by our grammar (decided
//    by xgrammar's matcher on our EBNF) exactly when ajv says it is valid; @hyperjump/json-schema
//    must agree with ajv. Disagreements are allowed only where json_schema_divergences.h explains
//    them for that case.
//  - The same texts against xgrammar's own grammar for the schema: every case where it and ours
//    disagree is listed with the reason in json_schema_divergences.h.
//  - Strings generated at random from our grammar (grammar_sampler.h) all parse and pass ajv.
//  - Cases our converter refuses must be refusals (GrammarError), counted by reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "grammar_sampler.h"
#include "json_schema_divergences.h"
#include "nanovllm/structured/json_schema.h"
#include "structured_oracles.h"
#include "test_paths.h"

namespace nanovllm::structured::test {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct Case {
  std::string name, dialect;
  ojson schema;
  std::vector<ojson> instances;
  std::string ebnf, error;  // ours: the grammar, or why it was refused
  std::vector<std::string> samples;
};

std::vector<Case> suite_cases() {
  std::vector<Case> out;
  fs::path dir =
      fs::path(nanovllm::test::source_dir()) / "tests/oracles/node_modules/json-schema-test-suite/tests/draft4";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  files.push_back(dir / "optional/format.json");
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    ojson groups = ojson::parse(slurp(f));
    for (size_t i = 0; i < groups.size(); ++i) {
      Case c;
      c.name = "draft4/" + f.stem().string() + "/" + std::to_string(i);
      c.dialect = "draft-04";
      c.schema = groups[i]["schema"];
      if (c.schema.is_object() && !c.schema.contains("$schema"))
        c.schema["$schema"] = "http://json-schema.org/draft-04/schema#";
      for (const ojson& t : groups[i]["tests"]) c.instances.push_back(t["data"]);
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<Case> fixture_cases() {
  std::vector<Case> out;
  ojson all = ojson::parse(slurp(nanovllm::test::fixture("json_schemas/schemas.json")));
  for (const ojson& s : all) {
    Case c;
    c.name = "ours/" + s["name"].get<std::string>();
    c.dialect = "2020-12";
    c.schema = s["schema"];
    for (const ojson& v : s["instances"]) c.instances.push_back(v);
    out.push_back(std::move(c));
  }
  return out;
}

// The first words of a refusal, for the counts ("keyword 'not' is not supported", ...).
std::string refusal_reason(const std::string& msg) {
  size_t at = msg.find("': ");
  std::string r = at == std::string::npos ? msg : msg.substr(at + 3);
  return r.substr(0, 60);
}

TEST(JsonSchemaOracle, MatchesValidatorsAndXgrammar) {
  if (!fs::exists(fs::path(nanovllm::test::source_dir()) / "tests/oracles/node_modules/json-schema-test-suite"))
    GTEST_SKIP() << "tests/oracles/node_modules is missing (npm install in tests/oracles)";
  std::vector<Case> cases = suite_cases();
  for (Case& c : fixture_cases()) cases.push_back(std::move(c));

  // Our grammars, with strict off: the references implement JSON Schema, where properties and
  // items not mentioned are allowed (strict mode is covered in test_json_schema.cpp).
  JsonSchemaOptions opt;
  opt.strict = false;
  ojson request = {{"cases", ojson::array()}};
  std::map<std::string, int> refusals;
  for (Case& c : cases) {
    try {
      Grammar g = json_schema_to_grammar(c.schema.dump(), opt);
      c.ebnf = g.to_ebnf();
      GrammarSampler sampler(g, std::hash<std::string>{}(c.name));
      for (int i = 0; i < 12 && sampler.can_generate(); ++i) c.samples.push_back(sampler.sample());
    } catch (const GrammarError& e) {
      c.error = e.what();
      ++refusals[refusal_reason(c.error)];
    }
    request["cases"].push_back({{"name", c.name},
                                {"schema", c.schema},
                                {"dialect", c.dialect},
                                {"strict", false},
                                {"ours", c.ebnf.empty() ? ojson() : ojson(c.ebnf)},
                                {"instances", c.instances},
                                {"samples", c.samples}});
  }
  std::string why;
  nlohmann::json results = run_structured_oracle("json_schema_oracle.mjs", request, &why);
  ASSERT_FALSE(results.is_null()) << why;

  int supported = 0, instances = 0, agree_ajv = 0, agree_hyper = 0, agree_xg = 0, xg_refused = 0, samples = 0,
      samples_valid = 0, approximated = 0;
  std::set<std::string> used_ajv, used_xg, used_hyper;
  for (const Case& c : cases) {
    const nlohmann::json& r = results.at(c.name);
    if (c.ebnf.empty()) continue;
    ++supported;
    ASSERT_FALSE(r.contains("ours_error"))
        << c.name << ": xgrammar could not read our EBNF: " << r["ours_error"] << "\n"
        << c.ebnf;
    for (size_t i = 0; i < c.instances.size(); ++i) {
      const nlohmann::json& row = r["instances"][i];
      ++instances;
      ASSERT_TRUE(row.contains("ajv")) << c.name << ": ajv failed: " << r.value("ajv_error", "");
      bool ajv = row["ajv"], ours = row["ours"];
      if (ours == ajv)
        ++agree_ajv;
      else if (kOursVsAjv.count(c.name))
        used_ajv.insert(c.name);
      else
        ADD_FAILURE() << c.name << " #" << i << ": ours " << ours << ", ajv " << ajv << " on " << row["text"]
                      << "\nschema " << c.schema.dump() << "\n"
                      << c.ebnf;
      if (row.value("hyper", !ajv) == ajv)
        ++agree_hyper;
      else if (kHyperVsAjv.count(c.name))
        used_hyper.insert(c.name);
      else
        ADD_FAILURE() << c.name << " #" << i << ": hyperjump " << row.value("hyper", false) << " vs ajv " << ajv
                      << " on " << row["text"] << " " << r.value("hyper_error", "") << row.value("hyper_error", "");
      if (!row.contains("xgrammar")) continue;
      if (row["xgrammar"] == ours)
        ++agree_xg;
      else if (kOursVsXgrammar.count(c.name))
        used_xg.insert(c.name);
      else
        ADD_FAILURE() << c.name << " #" << i << ": ours " << ours << ", xgrammar's own " << row["xgrammar"] << " on "
                      << row["text"] << "\nschema " << c.schema.dump();
    }
    if (r.contains("xgrammar_error")) {
      ++xg_refused;
      if (!kOursVsXgrammar.count(c.name))
        ADD_FAILURE() << c.name << ": xgrammar refuses the schema (" << r["xgrammar_error"]
                      << ") while we accept it; explain it in json_schema_divergences.h";
      used_xg.insert(c.name);
    }
    approximated += r.value("approximated_classes", 0);
    for (const nlohmann::json& s : r["samples"]) {
      ++samples;
      samples_valid += s["ajv"] == true;
      EXPECT_TRUE(s["parsed"] == true && s["ours"] == true) << c.name << ": sample " << s["text"];
      if (s["ajv"] != true && !kOursVsAjv.count(c.name))
        ADD_FAILURE() << c.name << ": generated " << s["text"] << " is not valid for ajv\n" << c.ebnf;
    }
  }
  for (const auto& [name, reason] : kOursVsAjv)
    EXPECT_TRUE(used_ajv.count(name)) << "stale divergence (ours vs ajv) for " << name << ": " << reason;
  for (const auto& [name, reason] : kOursVsXgrammar)
    EXPECT_TRUE(used_xg.count(name)) << "stale divergence (ours vs xgrammar) for " << name << ": " << reason;
  for (const auto& [name, reason] : kHyperVsAjv)
    EXPECT_TRUE(used_hyper.count(name)) << "stale divergence (hyperjump vs ajv) for " << name << ": " << reason;

  std::cout << "[json schema oracle] cases " << cases.size() << ", converted " << supported << ", refused "
            << cases.size() - size_t(supported) << "; instances " << instances << ": ours == ajv " << agree_ajv
            << ", hyperjump == ajv " << agree_hyper << ", ours == xgrammar " << agree_xg << " (xgrammar refused "
            << xg_refused << " schemas); random samples " << samples << ", ajv-valid " << samples_valid
            << " (the rest in oneOf cases); classes approximated for xgrammar " << approximated << "\n";
  for (const auto& [reason, n] : refusals) std::cout << "  refused x" << n << ": " << reason << "\n";
}

}  // namespace
}  // namespace nanovllm::structured::test
