// A request's structured-output fields -> StructuredOutputs (structured_request.h). Each field that
// asks for a constraint adds a candidate; more than one is an error naming two of them.
#include "nanovllm/config/structured_request.h"

#include <set>
#include <vector>

#include "nanovllm/config/request_json.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

using ojson = nlohmann::ordered_json;
using Kind = StructuredOutputs::Kind;

const ojson* field(const ojson& j, const std::string& name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& param, const std::string& want) {
  throw InvalidRequest(param, "'" + param + "' must be " + want);
}

[[noreturn]] void not_implemented(const std::string& param) {
  throw InvalidRequest(param,
                       "'" + param + "' (structural tags) is not implemented; use json, regex, choice or grammar");
}

bool boolean(const ojson& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean");
  return v.get<bool>();
}

std::string text(const ojson& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string");
  return v.get<std::string>();
}

// A JSON Schema given as an object (or a boolean schema) or as its JSON text: its compact text, in
// the client's key order.
std::string schema_text(const ojson& v, const std::string& param) {
  ojson schema = v;
  if (v.is_string()) {
    try {
      schema = parse_request_json<ojson>(v.get<std::string>());
    } catch (const InvalidRequest& e) {
      throw InvalidRequest(param, "'" + param + "' is " + e.what());
    }
  }
  if (!schema.is_object() && !schema.is_boolean()) wrong_type(param, "a JSON Schema (an object, or its JSON text)");
  return schema.dump();
}

std::vector<std::string> choices(const ojson& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, "a list of strings");
  std::vector<std::string> out;
  for (auto& c : v) {
    if (!c.is_string()) wrong_type(param, "a list of strings");
    out.push_back(c.get<std::string>());
  }
  return out;
}

struct Candidate {
  std::string param;  // where it was asked for, for messages ("structured_outputs.regex")
  std::string field;  // the top-level field
  StructuredOutputs spec;
};

Candidate candidate(std::string param, std::string field, Kind kind, std::string body = {},
                    std::vector<std::string> options = {}) {
  Candidate c{std::move(param), std::move(field), {}};
  c.spec.kind = kind;
  c.spec.text = std::move(body);
  c.spec.choices = std::move(options);
  return c;
}

// response_format: text (nothing), json_object, json_schema.
void read_response_format(const ojson& rf, std::vector<Candidate>& out) {
  const std::string p = "response_format";
  if (!rf.is_object()) wrong_type(p, "an object with a 'type'");
  const ojson* type = field(rf, "type");
  if (!type || !type->is_string())
    throw InvalidRequest(p, "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    out.push_back(candidate(p, p, Kind::JsonObject));
    return;
  }
  if (t == "structural_tag") not_implemented("response_format.structural_tag");
  if (t != "json_schema")
    throw InvalidRequest(
        p, "response_format.type must be \"text\", \"json_object\" or \"json_schema\" (got \"" + t + "\")");
  const ojson* js = field(rf, "json_schema");
  if (!js) throw InvalidRequest(p, "response_format.json_schema is required when the type is \"json_schema\"");
  if (!js->is_object()) wrong_type("response_format.json_schema", "an object {\"name\", \"schema\", \"strict\"}");
  const ojson* name = field(*js, "name");
  if (!name) throw InvalidRequest(p, "response_format.json_schema.name is required");
  text(*name, "response_format.json_schema.name");
  if (const ojson* d = field(*js, "description")) text(*d, "response_format.json_schema.description");
  if (const ojson* s = field(*js, "strict")) boolean(*s, "response_format.json_schema.strict");
  const ojson* schema = field(*js, "schema");
  if (!schema) throw InvalidRequest(p, "response_format.json_schema.schema is required");
  out.push_back(candidate(p, p, Kind::JsonSchema, schema_text(*schema, "response_format.json_schema.schema")));
}

// "[ \n\t]*" with the class in any order, each character literal or escaped (\n, \t, \x20, \u0020).
bool any_whitespace_class(const std::string& s) {
  if (s.size() < 4 || s.front() != '[' || s.substr(s.size() - 2) != "]*") return false;
  std::set<char> got;
  for (size_t i = 1; i + 2 < s.size(); ++i) {
    if (s[i] != '\\') {
      got.insert(s[i]);
      continue;
    }
    const std::string rest = s.substr(i + 1, s.size() - 2 - (i + 1));
    if (rest.rfind("n", 0) == 0 || rest.rfind("t", 0) == 0 || rest.rfind(" ", 0) == 0) {
      got.insert(rest[0] == 'n' ? '\n' : rest[0] == 't' ? '\t' : ' ');
      i += 1;
    } else if (rest.rfind("x20", 0) == 0) {
      got.insert(' ');
      i += 3;
    } else if (rest.rfind("u0020", 0) == 0) {
      got.insert(' ');
      i += 5;
    } else {
      return false;
    }
  }
  return got == std::set<char>{' ', '\n', '\t'};
}

// A whitespace pattern: null keeps the default; ours any_whitespace; others refused.
void read_whitespace_pattern(const ojson& v, const std::string& param, bool& any_whitespace) {
  const std::string pattern = text(v, param);
  if (!is_any_whitespace_pattern(pattern))
    throw InvalidRequest(param, "'" + param + "' " + ojson(pattern).dump() +
                                    " is not supported: leave it null (compact JSON, or the server's default) or "
                                    "give \"[ \\n\\t]*\" (any whitespace)");
  any_whitespace = true;
}

// The structured_outputs object (vLLM's StructuredOutputsParams).
void read_structured_outputs(const ojson& so, std::vector<Candidate>& out, bool& any_whitespace) {
  const std::string p = "structured_outputs";
  if (!so.is_object()) wrong_type(p, "an object");
  for (auto& [key, v] : so.items()) {
    const std::string at = p + "." + key;
    if (key == "structural_tag") {
      if (!v.is_null()) not_implemented(at);
      continue;
    }
    if (v.is_null()) continue;
    if (key == "json") {
      out.push_back(candidate(at, p, Kind::JsonSchema, schema_text(v, at)));
    } else if (key == "regex") {
      out.push_back(candidate(at, p, Kind::Regex, text(v, at)));
    } else if (key == "choice") {
      out.push_back(candidate(at, p, Kind::Choice, {}, choices(v, at)));
    } else if (key == "grammar") {
      out.push_back(candidate(at, p, Kind::Grammar, text(v, at)));
    } else if (key == "json_object") {
      if (boolean(v, at)) out.push_back(candidate(at, p, Kind::JsonObject));
    } else if (key == "disable_any_whitespace") {
      any_whitespace = !boolean(v, at);
    } else if (key == "whitespace_pattern") {
      read_whitespace_pattern(v, at, any_whitespace);
    } else if (key == "disable_fallback" || key == "disable_additional_properties") {
      boolean(v, at);  // accepted: one backend, schemas always strict (structured_outputs_config.h)
    } else {
      throw InvalidRequest(at, "'" + at +
                                   "' is not a structured_outputs field (json, regex, choice, grammar, json_object, "
                                   "disable_any_whitespace, whitespace_pattern, disable_fallback, "
                                   "disable_additional_properties)");
    }
  }
}

// vLLM's older top-level fields.
void read_guided_fields(const ojson& body, std::vector<Candidate>& out, bool& any_whitespace) {
  if (const ojson* v = field(body, "guided_json"))
    out.push_back(candidate("guided_json", "guided_json", Kind::JsonSchema, schema_text(*v, "guided_json")));
  if (const ojson* v = field(body, "guided_regex"))
    out.push_back(candidate("guided_regex", "guided_regex", Kind::Regex, text(*v, "guided_regex")));
  if (const ojson* v = field(body, "guided_choice"))
    out.push_back(candidate("guided_choice", "guided_choice", Kind::Choice, {}, choices(*v, "guided_choice")));
  if (const ojson* v = field(body, "guided_grammar"))
    out.push_back(candidate("guided_grammar", "guided_grammar", Kind::Grammar, text(*v, "guided_grammar")));
  if (field(body, "structural_tag")) not_implemented("structural_tag");
  if (const ojson* v = field(body, "guided_decoding_backend")) {
    const std::string name = text(*v, "guided_decoding_backend");
    if (!is_structured_backend(name))
      throw InvalidRequest("guided_decoding_backend", unknown_structured_backend("guided_decoding_backend", name));
  }
  if (const ojson* v = field(body, "guided_whitespace_pattern"))
    read_whitespace_pattern(*v, "guided_whitespace_pattern", any_whitespace);
}

}  // namespace

bool is_any_whitespace_pattern(const std::string& pattern) { return any_whitespace_class(pattern); }

StructuredRequest read_structured_fields(const ojson& body, const StructuredOutputsConfig& cfg) {
  std::vector<Candidate> found;
  bool any_whitespace = !cfg.disable_any_whitespace;
  if (const ojson* rf = field(body, "response_format")) read_response_format(*rf, found);
  if (const ojson* so = field(body, "structured_outputs")) read_structured_outputs(*so, found, any_whitespace);
  read_guided_fields(body, found, any_whitespace);
  StructuredRequest r;
  if (found.empty()) return r;
  if (found.size() > 1)
    throw InvalidRequest(found[1].param,
                         "You can only use one kind of structured outputs constraint, but the request "
                         "has both " +
                             found[0].param + " and " + found[1].param);
  r.spec = std::move(found[0].spec);
  r.field = found[0].field;
  // Whitespace matters to the JSON kinds only; the others keep the cache key independent of it.
  r.spec.any_whitespace = (r.spec.kind == Kind::JsonSchema || r.spec.kind == Kind::JsonObject) ? any_whitespace : false;
  try {
    r.spec.validate();
  } catch (const InvalidRequest&) {  // its message names structured_outputs.<kind>: name the field used
    const std::string& p = found[0].param;
    throw InvalidRequest(
        p, "'" + p + "' " + (r.spec.kind == Kind::Choice ? "must list at least one string" : "must not be empty"));
  }
  return r;
}

}  // namespace nanovllm
