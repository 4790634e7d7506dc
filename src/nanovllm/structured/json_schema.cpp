// JSON Schema -> grammar (json_schema.h): the emitter. Each distinct conjunction of schemas that a
// value must satisfy becomes one rule (memoized by its schema pointers, so recursive `$ref`s are
// rule references); its body is the Node's constraints per JSON type: literals for enum/const,
// digit-range grammars for numeric bounds, formats and patterns for strings, fixed-order property
// sequences for objects, prefix + repeated items for arrays. anyOf/oneOf groups are distributed:
// each branch is merged with the rest of its parent and emitted as one alternative.
#include "nanovllm/structured/json_schema.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "nanovllm/structured/json_number_ranges.h"
#include "nanovllm/structured/json_schema_formats.h"
#include "nanovllm/structured/json_schema_node.h"
#include "nanovllm/structured/json_schema_strings.h"
#include "nanovllm/structured/regex.h"
#include "nanovllm/utils/json_depth.h"

namespace nanovllm::structured {

namespace {

using namespace detail;

std::string rule_hint(const Conjunction& c) {
  if (c.empty()) return "any";
  const std::string& p = c.back().ptr;
  size_t cut = p.rfind('/');
  std::string tail = p.substr(cut + 1), out;
  if (!tail.empty() && tail.find_first_not_of("0123456789") == std::string::npos && cut != std::string::npos && cut > 0)
    tail = p.substr(p.rfind('/', cut - 1) + 1, cut - p.rfind('/', cut - 1) - 1) + "_" + tail;  // anyOf_1, items_0
  for (char ch : tail)
    if (std::isalnum(uint8_t(ch)) || ch == '_') out += ch;
  return out.empty() ? "value" : out;
}

class Emitter {
 public:
  Emitter(Grammar& g, const SchemaDoc& doc, std::string prefix)
      : g_(g), doc_(doc), prefix_(std::move(prefix)), ws_suffix_(doc.opt.any_whitespace ? "_ws" : "") {}

  int32_t root(const ojson& schema) {
    int32_t r = g_.add_rule(g_.fresh_name(prefix_));
    Conjunction c{{"", &schema}};
    rules_[conjunction_key(c)] = r;
    define(r, c);
    return r;
  }

  // Any JSON value; also the whole json_object grammar.
  int32_t any_value() {
    return basic("json_value", [&] { return any_value_body(); });
  }
  int32_t any_object() {
    return basic("json_object", [&] { return object_of_any(); });
  }

 private:
  // --- separators (compact ", " / ": ", or [ \n\t]* around "," and ":") ---
  int32_t ws() { return g_.star(g_.char_class({{' ', ' '}, {'\n', '\n'}, {'\t', '\t'}})); }
  int32_t tok(const char* t) {
    if (!doc_.opt.any_whitespace) return g_.literal(std::string(t) + (t[0] == ',' || t[0] == ':' ? " " : ""));
    return g_.seq({ws(), g_.literal(t), ws()});
  }
  int32_t open(const char* t) { return doc_.opt.any_whitespace ? g_.seq({g_.literal(t), ws()}) : g_.literal(t); }
  int32_t close(const char* t) { return doc_.opt.any_whitespace ? g_.seq({ws(), g_.literal(t)}) : g_.literal(t); }

  // --- shared rules for unconstrained values ---
  int32_t basic(const std::string& base, const std::function<int32_t()>& body) {
    std::string name = base + ws_suffix_;
    int32_t r = g_.rule_named(name);
    if (r < 0) {
      r = g_.add_rule(name);
      g_.define(r, body());
    }
    return g_.ref(r);
  }
  int32_t any_value_ref() { return any_value(); }
  int32_t string_ref() {
    return basic("json_string", [&] { return quoted(g_.star(json_char(g_))); });
  }
  int32_t number_ref() {
    return basic("json_number", [&] {
      auto digits = [&] { return g_.plus(g_.char_class({{'0', '9'}})); };
      // -?(0|[1-9][0-9]*): a number may be -0 (-0.5 needs it), as xgrammar's.
      int32_t int_part = g_.seq(
          {g_.optional(g_.literal("-")),
           g_.choice({g_.literal("0"), g_.seq({g_.char_class({{'1', '9'}}), g_.star(g_.char_class({{'0', '9'}}))})})});
      return g_.seq({int_part, g_.optional(g_.seq({g_.literal("."), digits()})),
                     g_.optional(g_.seq({g_.char_class({{'e', 'e'}, {'E', 'E'}}),
                                         g_.optional(g_.char_class({{'+', '+'}, {'-', '-'}})), digits()}))});
    });
  }
  int32_t integer_ref() {
    return basic("json_integer", [&] { return integer_body(); });
  }
  // "0" | "-"? [1-9][0-9]*: no "-0" (valid JSON, but not a form a model needs; xgrammar's too).
  int32_t integer_body() {
    return g_.choice({g_.literal("0"), g_.seq({g_.optional(g_.literal("-")), g_.char_class({{'1', '9'}}),
                                               g_.star(g_.char_class({{'0', '9'}}))})});
  }
  int32_t any_value_body() {
    return g_.choice({any_object(), basic("json_array", [&] { return array_of_any(); }), string_ref(), number_ref(),
                      g_.literal("true"), g_.literal("false"), g_.literal("null")});
  }
  int32_t array_of_any() {
    return g_.choice({g_.seq({open("["), close("]")}),
                      g_.seq({open("["), any_value_ref(), g_.star(g_.seq({tok(","), any_value_ref()})), close("]")})});
  }
  int32_t object_of_any() {
    auto entry = [&] { return g_.seq({string_ref(), tok(":"), any_value_ref()}); };
    return g_.choice({g_.seq({open("{"), close("}")}),
                      g_.seq({open("{"), entry(), g_.star(g_.seq({tok(","), entry()})), close("}")})});
  }
  int32_t quoted(int32_t content) { return g_.seq({g_.literal("\""), content, g_.literal("\"")}); }

  // --- rules per conjunction ---
  int32_t value(const Conjunction& given) {
    if (given.empty()) return any_value_ref();
    Conjunction c = follow_pure_refs(doc_, given);
    if (allows_nothing(c)) return -1;
    std::string key = conjunction_key(c);
    auto it = rules_.find(key);
    if (it != rules_.end()) return nothing_.count(it->second) ? -1 : g_.ref(it->second);
    if (int(rules_.size()) >= doc_.opt.max_rules)
      throw GrammarError("JSON schema needs more than " + std::to_string(doc_.opt.max_rules) +
                         " grammar rules (limit max_rules)");
    int32_t r = g_.add_rule(g_.fresh_name(prefix_ + "_" + rule_hint(c)));
    rules_[key] = r;
    define(r, c);
    return nothing_.count(r) ? -1 : g_.ref(r);
  }
  void define(int32_t rule, const Conjunction& c) {
    int32_t body = node_expr(build_node(doc_, c));
    if (body < 0) {
      nothing_.insert(rule);
      body = g_.choice({});
    }
    g_.define(rule, body);
  }

  int32_t node_expr(const Node& n) {
    if (n.groups.empty()) {
      if (--alternatives_left_ < 0)
        throw GrammarError("JSON schema at '#" + n.ptr + "': more than " + std::to_string(doc_.opt.max_alternatives) +
                           " anyOf/oneOf combinations (limit max_alternatives)");
      return plain(n);
    }
    Node rest = n;
    rest.groups.erase(rest.groups.begin());
    std::vector<int32_t> alts;
    bool alone = is_trivial(rest);  // then a branch is its own rule, shared with other uses
    for (const Conjunction& branch : n.groups.front()) {
      if (alone) {
        if (int32_t e = value(branch); e >= 0) alts.push_back(e);
        continue;
      }
      Node m = rest;
      merge_nodes(m, build_node(doc_, branch));
      int32_t e = node_expr(m);
      if (e >= 0) alts.push_back(e);
    }
    return alts.empty() ? -1 : g_.choice(alts);
  }

  int32_t plain(const Node& n) {
    std::vector<int32_t> alts;
    if (n.values) {
      Node rest = n;
      rest.values.reset();
      for (const ojson& v : *n.values)
        if (node_accepts(doc_, rest, v)) alts.push_back(literal_value(v));
      return alts.empty() ? -1 : g_.choice(alts);
    }
    auto add = [&](int32_t e) {
      if (e >= 0) alts.push_back(e);
    };
    if (n.types & kNull) add(g_.literal("null"));
    if (n.types & kBoolean) add(g_.choice({g_.literal("true"), g_.literal("false")}));
    if (n.types & kNumber) add(number_expr(n));
    if (n.types & kString) add(string_expr(n));
    if (n.types & kArray) add(array_expr(n));
    if (n.types & kObject) add(object_expr(n));
    return alts.empty() ? -1 : g_.choice(alts);
  }

  int32_t literal_value(const ojson& v) {
    if (v.is_object()) {
      std::vector<int32_t> parts = {open("{")};
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) parts.push_back(tok(","));
        first = false;
        parts.push_back(g_.literal(ojson(it.key()).dump()));
        parts.push_back(tok(":"));
        parts.push_back(literal_value(it.value()));
      }
      parts.push_back(close("}"));
      return g_.seq(parts);
    }
    if (v.is_array()) {
      std::vector<int32_t> parts = {open("[")};
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) parts.push_back(tok(","));
        parts.push_back(literal_value(v[i]));
      }
      parts.push_back(close("]"));
      return g_.seq(parts);
    }
    if (v.is_number()) return g_.literal(Decimal::from_json(v).str());
    return g_.literal(v.dump());
  }

  int32_t number_expr(const Node& n) {
    bool bounded = n.lo || n.hi;
    if (n.types & kFraction) return bounded ? number_range_expr(g_, n.lo, n.hi) : number_ref();
    return bounded ? integer_range_expr(g_, n.lo, n.hi) : integer_ref();
  }

  int32_t string_expr(const Node& n) {
    bool has_length = n.min_length > 0 || n.max_length >= 0;
    if (n.format || n.pattern) {
      const std::string& where = n.format ? n.format_ptr : n.pattern_ptr;
      if (n.format && n.pattern)
        throw GrammarError("JSON schema at '#" + where + "': 'format' together with 'pattern' is not supported");
      if (has_length)
        throw GrammarError("JSON schema at '#" + where + "': '" + (n.format ? "format" : "pattern") +
                           "' together with minLength / maxLength is not supported");
      if (n.format) return quoted(add_string_format(g_, *n.format));
      RegexOptions ro;
      ro.json_string_content = true;
      try {
        return quoted(add_regex(g_, search_to_full_match(*n.pattern), ro, prefix_ + "_pattern"));
      } catch (const GrammarError& e) {
        throw GrammarError("JSON schema at '#" + n.pattern_ptr + "': " + e.what());
      }
    }
    if (!has_length) return string_ref();
    if (n.max_length >= 0 && n.min_length > n.max_length) return -1;
    if (n.min_length > INT32_MAX || n.max_length > INT32_MAX)
      throw GrammarError("JSON schema at '#" + n.ptr + "': string length bound too large");
    return quoted(
        g_.repeat(json_char(g_), int32_t(n.min_length), n.max_length < 0 ? kUnbounded : int32_t(n.max_length)));
  }

  // Elements from index i on (count so far i; a separator before each but the first).
  int32_t array_from(const Node& n, const Conjunction& extra, size_t i) {
    int64_t lo = n.min_items, hi = n.max_items;
    bool may_stop = int64_t(i) >= lo;
    if (hi >= 0 && int64_t(i) >= hi) return g_.empty();
    if (i < n.prefix.size()) {
      int32_t v = value(n.prefix[i]);
      int32_t rest = v < 0 ? -1 : array_from(n, extra, i + 1);
      int32_t item = rest < 0 ? -1 : (i ? g_.seq({tok(","), v, rest}) : g_.seq({v, rest}));
      if (item < 0) return may_stop ? g_.empty() : -1;
      return may_stop ? g_.optional(item) : item;
    }
    if (allows_nothing(extra)) return may_stop ? g_.empty() : -1;
    int64_t need = std::max<int64_t>(lo - int64_t(i), 0), room = hi < 0 ? -1 : hi - int64_t(i);
    if (need > INT32_MAX || room > INT32_MAX)
      throw GrammarError("JSON schema at '#" + n.ptr + "': item count bound too large");
    if (value(extra) < 0) return need == 0 ? g_.empty() : -1;
    auto more = [&](int64_t a, int64_t b) {
      return g_.repeat(g_.seq({tok(","), value(extra)}), int32_t(a), b < 0 ? kUnbounded : int32_t(b));
    };
    if (i) return more(need, room);
    int32_t items = g_.seq({value(extra), more(std::max<int64_t>(need - 1, 0), room < 0 ? -1 : room - 1)});
    return need == 0 ? g_.optional(items) : items;
  }
  int32_t array_expr(const Node& n) {
    if (n.max_items >= 0 && n.min_items > n.max_items) return -1;
    Conjunction extra = extra_items_conj(doc_, n);
    if (n.prefix.empty() && extra.empty() && n.min_items == 0 && n.max_items < 0)
      return basic("json_array", [&] { return array_of_any(); });
    int32_t body = array_from(n, extra, 0);
    return body < 0 ? -1 : g_.seq({open("["), body, close("]")});
  }

  int32_t object_expr(const Node& n) {
    struct Entry {
      std::string name;
      Conjunction conj;
      bool required;
    };
    Conjunction extra = additional_conj(doc_, n);
    std::vector<Entry> entries;
    std::vector<std::string> names;
    for (const auto& [name, conj] : n.props) {
      bool req = std::find(n.required.begin(), n.required.end(), name) != n.required.end();
      names.push_back(name);
      if (value(conj) < 0) {
        if (req) return -1;
        continue;
      }
      entries.push_back({name, conj, req});
    }
    for (const std::string& r : n.required) {
      if (std::find(names.begin(), names.end(), r) != names.end()) continue;
      if (allows_nothing(extra) || value(extra) < 0) return -1;
      names.push_back(r);
      entries.push_back({r, extra, true});
    }
    bool more = !allows_nothing(extra) && value(extra) >= 0;
    if (entries.empty() && more && extra.empty()) return any_object();
    auto kv = [&](const Entry& e) { return g_.seq({g_.literal(ojson(e.name).dump()), tok(":"), value(e.conj)}); };
    auto extra_kv = [&] { return g_.seq({quoted(key_excluding(g_, names)), tok(":"), value(extra)}); };
    // tail(i): entries i.. after at least one entry; head(i): entries i.. with none written yet.
    const std::string base = prefix_ + "_part";
    auto new_rule = [&](const char* kind, size_t i) {
      return g_.add_rule(g_.fresh_name(base + kind + std::to_string(i)));
    };
    int32_t tail = new_rule("_t", entries.size());
    g_.define(tail, more ? g_.star(g_.seq({tok(","), extra_kv()})) : g_.empty());
    int32_t head = new_rule("_h", entries.size());
    g_.define(head, more ? g_.optional(g_.seq({extra_kv(), g_.star(g_.seq({tok(","), extra_kv()}))})) : g_.empty());
    for (size_t i = entries.size(); i-- > 0;) {
      const Entry& e = entries[i];
      int32_t t = new_rule("_t", i);
      int32_t with_t = g_.seq({tok(","), kv(e), g_.ref(tail)});
      g_.define(t, e.required ? with_t : g_.choice({with_t, g_.ref(tail)}));
      int32_t h = new_rule("_h", i);
      int32_t with_h = g_.seq({kv(e), g_.ref(tail)});
      g_.define(h, e.required ? with_h : g_.choice({with_h, g_.ref(head)}));
      tail = t, head = h;
    }
    return g_.seq({open("{"), g_.ref(head), close("}")});
  }

  Grammar& g_;
  const SchemaDoc& doc_;
  std::string prefix_, ws_suffix_;
  std::unordered_map<std::string, int32_t> rules_;
  std::unordered_set<int32_t> nothing_;
  int alternatives_left_ = 0;

 public:
  void set_budget() { alternatives_left_ = doc_.opt.max_alternatives; }
};

int json_depth(const ojson& v, int limit, int depth = 0) {
  if (depth > limit) return depth;
  int d = depth;
  if (v.is_object() || v.is_array())
    for (const auto& x : v) {
      d = std::max(d, json_depth(x, limit, depth + 1));
      if (d > limit) break;
    }
  return d;
}

}  // namespace

int32_t add_json_schema(Grammar& g, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt,
                        const std::string& prefix) {
  if (json_depth(schema, opt.max_depth) > opt.max_depth)
    throw GrammarError("JSON schema nests deeper than " + std::to_string(opt.max_depth) + " levels (limit max_depth)");
  SchemaDoc doc;
  doc.root = &schema;
  doc.opt = opt;
  if (schema.is_object() && schema.contains("$schema") && schema["$schema"].is_string()) {
    const std::string& s = schema["$schema"].get_ref<const std::string&>();
    doc.refs_ignore_siblings = s.find("draft-04") != std::string::npos || s.find("draft-06") != std::string::npos ||
                               s.find("draft-07") != std::string::npos;
  }
  Emitter e(g, doc, prefix);
  e.set_budget();
  int32_t r = e.root(schema);
  if (g.expr(g.rule(r).body).kind == ExprKind::Choice && g.expr(g.rule(r).body).items.empty())
    throw GrammarError("JSON schema at '#': no JSON value satisfies it");
  return r;
}

int32_t add_json_schema(Grammar& g, const nlohmann::json& schema, const JsonSchemaOptions& opt,
                        const std::string& prefix) {
  return add_json_schema(g, nlohmann::ordered_json::parse(schema.dump()), opt, prefix);
}

Grammar json_schema_to_grammar(std::string_view text, const JsonSchemaOptions& opt) {
  if (text.size() > opt.max_schema_bytes)
    throw GrammarError("JSON schema is " + std::to_string(text.size()) + " bytes, over the limit of " +
                       std::to_string(opt.max_schema_bytes));
  if (size_t at = find_json_too_deep(text, size_t(std::max(opt.max_depth, 1)) + 1); at != std::string::npos)
    throw GrammarError("JSON schema nests deeper than " + std::to_string(opt.max_depth) + " levels (at byte " +
                       std::to_string(at) + ")");
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw GrammarError("JSON schema is not valid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  }
  Grammar g;
  g.set_root(add_json_schema(g, schema, opt, "root"));
  return g;
}

Grammar json_object_grammar(const JsonSchemaOptions& opt) {
  Grammar g;
  SchemaDoc doc;
  doc.opt = opt;
  Emitter e(g, doc, "root");
  int32_t root = g.add_rule("root");
  g.define(root, e.any_object());
  g.set_root(root);
  return g;
}

}  // namespace nanovllm::structured
