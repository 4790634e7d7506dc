// Schema keywords -> Node (json_schema_node.h): reads each supported keyword, refuses the others by
// name and pointer, resolves local `$ref`s (refusing chains that loop without reaching a schema) and
// merges `allOf` branches and `$ref` targets into one conjunction of constraints.
#include "nanovllm/structured/json_schema_node.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace nanovllm::structured::detail {

namespace {

[[noreturn]] void fail(const std::string& ptr, const std::string& what) {
  throw GrammarError("JSON schema at '" + (ptr.empty() ? std::string("#") : "#" + ptr) + "': " + what);
}

std::string escape_pointer_token(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// Keywords that only annotate (or that vLLM users' tools emit as metadata): ignored.
const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title",
                                          "description",
                                          "default",
                                          "examples",
                                          "$schema",
                                          "$id",
                                          "id",
                                          "$comment",
                                          "$defs",
                                          "definitions",
                                          "deprecated",
                                          "readOnly",
                                          "writeOnly",
                                          "nullable",
                                          "discriminator",
                                          "contentMediaType",
                                          "contentEncoding",
                                          "$anchor",
                                          "example",
                                          "externalDocs",
                                          "xml"};
  return k;
}

// JSON Schema assertion keywords this converter does not implement: refused, never ignored.
const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k = {"not",
                                          "if",
                                          "then",
                                          "else",
                                          "dependencies",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "patternProperties",
                                          "propertyNames",
                                          "multipleOf",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "minProperties",
                                          "maxProperties",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "$dynamicRef",
                                          "$recursiveRef",
                                          "$dynamicAnchor",
                                          "$recursiveAnchor",
                                          "contentSchema",
                                          "divisibleBy",
                                          "disallow",
                                          "extends"};
  return k;
}

// Formats with a grammar (json_schema_formats.h), and formats that only annotate.
bool format_supported(const std::string& f) {
  static const std::set<std::string> k = {"date", "time", "date-time", "uuid",    "email",
                                          "ipv4", "ipv6", "uri",       "hostname"};
  return k.count(f) != 0;
}
bool format_known_unsupported(const std::string& f) {
  static const std::set<std::string> k = {"duration",  "uri-reference", "iri",          "iri-reference",
                                          "idn-email", "idn-hostname",  "json-pointer", "relative-json-pointer",
                                          "regex",     "uri-template"};
  return k.count(f) != 0;
}

int64_t non_negative_int(const ojson& v, const std::string& ptr, const char* kw) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    uint64_t u = v.get<uint64_t>();
    return int64_t(std::min<uint64_t>(u, uint64_t(INT64_MAX)));
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && std::floor(d) == d) return d > 9e18 ? INT64_MAX : int64_t(d);
  }
  fail(ptr, std::string("'") + kw + "' must be a non-negative integer");
}

uint8_t type_bits(const ojson& t, const std::string& ptr) {
  auto one = [&](const ojson& s) -> uint8_t {
    if (!s.is_string()) fail(ptr, "'type' must be a string or an array of strings");
    const std::string& n = s.get_ref<const std::string&>();
    if (n == "null") return kNull;
    if (n == "boolean") return kBoolean;
    if (n == "object") return kObject;
    if (n == "array") return kArray;
    if (n == "string") return kString;
    if (n == "integer") return kInteger;
    if (n == "number") return kNumber;
    if (n == "any") return kAllTypes;  // draft 3
    fail(ptr, "unknown type '" + n + "'");
  };
  if (!t.is_array()) return one(t);
  uint8_t bits = 0;
  for (const ojson& s : t) bits |= one(s);
  return bits;
}

void tighten_lo(Node& n, NumBound b) {
  if (!n.lo) return void(n.lo = b);
  int c = compare(b.value, n.lo->value);
  if (c > 0 || (c == 0 && b.exclusive)) n.lo = b;
}
void tighten_hi(Node& n, NumBound b) {
  if (!n.hi) return void(n.hi = b);
  int c = compare(b.value, n.hi->value);
  if (c < 0 || (c == 0 && b.exclusive)) n.hi = b;
}

void concat(Conjunction& a, const Conjunction& b) {
  for (const Conjunct& x : b) add_conjunct(a, x);
}

const ojson& false_schema() {
  static const ojson f = false;
  return f;
}

class NodeBuilder {
 public:
  explicit NodeBuilder(const SchemaDoc& doc) : doc_(doc) {}

  // Merges one schema into `n`.
  void add(Node& n, const Conjunct& c) {
    if (std::find(stack_.begin(), stack_.end(), c.ptr) != stack_.end()) {
      std::string chain;
      for (const std::string& p : stack_) chain += "#" + p + " -> ";
      fail(c.ptr, "$ref chain " + chain + "#" + c.ptr + " loops without reaching a schema");
    }
    if (!done_.insert(c.ptr).second) return;  // merging the same schema twice changes nothing
    if (stack_.size() > size_t(std::max(doc_.opt.max_depth, 1)) * 4)
      fail(c.ptr, "$ref / allOf nesting deeper than the limit");
    stack_.push_back(c.ptr);
    Node one = single(c);
    stack_.pop_back();
    merge_nodes(n, one);
  }

 private:
  Node single(const Conjunct& c) {
    const ojson& s = *c.schema;
    const std::string& p = c.ptr;
    Node n;
    n.ptr = p;
    if (s.is_boolean()) {
      if (!s.get<bool>()) n.types = 0, n.values = std::vector<ojson>{};
      return n;
    }
    if (!s.is_object()) fail(p, "a schema must be an object or a boolean");
    if (s.contains("$ref")) {
      const ojson& r = s["$ref"];
      if (!r.is_string()) fail(p, "'$ref' must be a string");
      add(n, resolve_ref(doc_, r.get<std::string>(), p));
      if (doc_.refs_ignore_siblings) return n;
    }
    objects(n, s, p);
    arrays(n, s, p);
    for (auto it = s.begin(); it != s.end(); ++it) keyword(n, it.key(), it.value(), p, s);
    if (s.contains("nullable") && s["nullable"] == true && s.contains("type")) n.types |= kNull;
    return n;
  }

  // properties / required / additionalProperties of one schema, together: its additionalProperties
  // does not apply to its own properties.
  void objects(Node& n, const ojson& s, const std::string& p) {
    Node o;
    if (s.contains("properties")) {
      const ojson& v = s["properties"];
      const std::string kp = p + "/properties";
      if (!v.is_object()) fail(kp, "'properties' must be an object");
      o.has_object_keyword = true;
      for (auto it = v.begin(); it != v.end(); ++it)
        o.props.push_back({it.key(), {{kp + "/" + escape_pointer_token(it.key()), &it.value()}}});
    }
    if (s.contains("required")) {
      const ojson& v = s["required"];
      if (!v.is_array()) fail(p + "/required", "'required' must be an array of strings");
      o.has_object_keyword = true;
      for (const ojson& r : v) {
        if (!r.is_string()) fail(p + "/required", "'required' must be an array of strings");
        if (std::find(o.required.begin(), o.required.end(), r.get<std::string>()) == o.required.end())
          o.required.push_back(r.get<std::string>());
      }
    }
    if (s.contains("additionalProperties")) {
      const ojson& v = s["additionalProperties"];
      const std::string kp = p + "/additionalProperties";
      if (!v.is_boolean() && !v.is_object()) fail(kp, "'additionalProperties' must be a boolean or a schema");
      o.has_object_keyword = true;
      o.additional = Conjunction{{kp, &v}};
    }
    merge_nodes(n, o);
  }

  // prefixItems / items / additionalItems of one schema, together: its `items` (after prefixItems)
  // or additionalItems (after array-form items) applies past its own prefix only.
  void arrays(Node& n, const ojson& s, const std::string& p) {
    Node a;
    auto prefix_of = [&](const char* kw) {
      const ojson& v = s[kw];
      const std::string kp = p + "/" + kw;
      for (size_t i = 0; i < v.size(); ++i) a.prefix.push_back({{kp + "/" + std::to_string(i), &v[i]}});
    };
    auto schema_of = [&](const char* kw) {
      const ojson& v = s[kw];
      if (!v.is_boolean() && !v.is_object()) fail(p + "/" + kw, std::string("'") + kw + "' must be a schema");
      a.items = Conjunction{{p + "/" + kw, &v}};
    };
    bool items_array = s.contains("items") && s["items"].is_array();
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(p + "/prefixItems", "'prefixItems' must be an array of schemas");
      if (items_array) fail(p + "/items", "'items' as an array together with 'prefixItems'");
      prefix_of("prefixItems");
    }
    if (items_array) {
      prefix_of("items");
      if (s.contains("additionalItems")) schema_of("additionalItems");
    } else if (s.contains("items")) {
      schema_of("items");
    }
    merge_nodes(n, a);
  }

  void keyword(Node& n, const std::string& k, const ojson& v, const std::string& p, const ojson& s) {
    const std::string kp = p + "/" + escape_pointer_token(k);
    static const std::set<std::string> handled = {"properties", "required",    "additionalProperties",
                                                  "items",      "prefixItems", "additionalItems"};
    if (handled.count(k)) return;
    if (k == "$ref" || annotation_keywords().count(k) || k.rfind("x-", 0) == 0) return;
    if (unsupported_keywords().count(k)) fail(kp, "keyword '" + k + "' is not supported");
    if (k == "type") {
      n.types &= type_bits(v, kp);
    } else if (k == "enum" || k == "const") {
      std::vector<ojson> vals;
      if (k == "const")
        vals.push_back(v);
      else if (!v.is_array())
        fail(kp, "'enum' must be an array");
      else
        vals.assign(v.begin(), v.end());
      Node e;
      e.values = std::move(vals);
      merge_nodes(n, e);
    } else if (k == "minLength") {
      n.min_length = std::max(n.min_length, non_negative_int(v, kp, "minLength"));
    } else if (k == "maxLength") {
      int64_t m = non_negative_int(v, kp, "maxLength");
      n.max_length = n.max_length < 0 ? m : std::min(n.max_length, m);
    } else if (k == "pattern") {
      if (!v.is_string()) fail(kp, "'pattern' must be a string");
      n.pattern = v.get<std::string>(), n.pattern_ptr = kp;
    } else if (k == "format") {
      if (!v.is_string()) fail(kp, "'format' must be a string");
      std::string f = v.get<std::string>();
      if (format_known_unsupported(f)) fail(kp, "format '" + f + "' is not supported");
      if (format_supported(f)) n.format = f, n.format_ptr = kp;  // other names only annotate
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      number_bound(n, k, v, kp, s);
    } else if (k == "minItems") {
      n.min_items = std::max(n.min_items, non_negative_int(v, kp, "minItems"));
    } else if (k == "maxItems") {
      int64_t m = non_negative_int(v, kp, "maxItems");
      n.max_items = n.max_items < 0 ? m : std::min(n.max_items, m);
    } else if (k == "uniqueItems") {
      if (!v.is_boolean()) fail(kp, "'uniqueItems' must be a boolean");
      if (v.get<bool>()) fail(kp, "keyword 'uniqueItems' (true) is not supported");
    } else if (k == "allOf" || k == "anyOf" || k == "oneOf") {
      if (!v.is_array() || v.empty()) fail(kp, "'" + k + "' must be a non-empty array of schemas");
      std::vector<Conjunction> alts;
      for (size_t i = 0; i < v.size(); ++i) alts.push_back({{kp + "/" + std::to_string(i), &v[i]}});
      if (k == "allOf") {
        for (const Conjunction& a : alts) add(n, a[0]);
      } else {
        n.groups.push_back(std::move(alts));  // oneOf is treated as anyOf, as xgrammar does
      }
    }
    // Anything else is an unknown keyword: JSON Schema ignores those.
  }

  void number_bound(Node& n, const std::string& k, const ojson& v, const std::string& kp, const ojson& s) {
    if (v.is_boolean()) {  // draft 4: exclusiveMinimum / exclusiveMaximum modify minimum / maximum
      if (k != "exclusiveMinimum" && k != "exclusiveMaximum") fail(kp, "'" + k + "' must be a number");
      return;  // applied with minimum / maximum below
    }
    if (!v.is_number()) fail(kp, "'" + k + "' must be a number");
    if (v.is_number_float() && !std::isfinite(v.get<double>())) fail(kp, "'" + k + "' must be finite");
    NumBound b{Decimal::from_json(v), k[0] == 'e'};
    if (k == "minimum" || k == "maximum") {
      const char* ex = k == "minimum" ? "exclusiveMinimum" : "exclusiveMaximum";
      if (s.contains(ex) && s[ex] == true) b.exclusive = true;
    }
    if (k == "minimum" || k == "exclusiveMinimum")
      tighten_lo(n, b);
    else
      tighten_hi(n, b);
  }

  const SchemaDoc& doc_;
  std::vector<std::string> stack_;
  std::set<std::string> done_;
};

}  // namespace

void add_conjunct(Conjunction& c, Conjunct x) {
  auto it =
      std::lower_bound(c.begin(), c.end(), x.ptr, [](const Conjunct& a, const std::string& p) { return a.ptr < p; });
  if (it != c.end() && it->ptr == x.ptr) return;
  c.insert(it, std::move(x));
}

std::string conjunction_key(const Conjunction& c) {
  std::string k;
  for (const Conjunct& x : c) k += x.ptr + '\x1f';
  return k;
}

Decimal Decimal::from_json(const ojson& v) {
  std::string text;
  if (v.is_number_unsigned())
    text = std::to_string(v.get<uint64_t>());
  else if (v.is_number_integer())
    text = std::to_string(v.get<int64_t>());
  else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v.get<double>());  // shortest round-trip form
    text.assign(buf, r.ptr);
  }
  Decimal d;
  size_t i = 0;
  if (text[0] == '-') d.negative = true, i = 1;
  std::string digits;
  int point = -1;  // digits before the decimal point
  int exp = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.')
      point = int(digits.size());
    else if (c == 'e' || c == 'E') {
      exp = std::stoi(text.substr(i + 1));
      break;
    } else
      digits += c;
  }
  if (point < 0) point = int(digits.size());
  point += exp;
  if (point < 0) digits.insert(0, size_t(-point), '0'), point = 0;
  if (point > int(digits.size())) digits.append(size_t(point) - digits.size(), '0');
  d.int_digits = digits.substr(0, size_t(point));
  d.frac_digits = digits.substr(size_t(point));
  d.int_digits.erase(0, std::min(d.int_digits.find_first_not_of('0'), d.int_digits.size()));
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  if (d.int_digits.empty() && d.frac_digits.empty()) d.negative = false;
  return d;
}

std::string Decimal::str() const {
  std::string s = negative ? "-" : "";
  s += int_digits.empty() ? "0" : int_digits;
  if (!frac_digits.empty()) s += "." + frac_digits;
  return s;
}

int compare(const Decimal& a, const Decimal& b) {
  auto mag = [](const Decimal& x, const Decimal& y) {
    if (x.int_digits.size() != y.int_digits.size()) return x.int_digits.size() < y.int_digits.size() ? -1 : 1;
    if (int c = x.int_digits.compare(y.int_digits)) return c < 0 ? -1 : 1;
    int c = x.frac_digits.compare(y.frac_digits);  // no trailing zeros: lexicographic is numeric
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  };
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int m = mag(a, b);
  return a.negative ? -m : m;
}

Conjunct resolve_ref(const SchemaDoc& doc, const std::string& ref, const std::string& at) {
  const std::string where = at + "/$ref";
  if (ref.empty() || ref[0] != '#')
    fail(where, "$ref '" + ref + "' is not supported: only local references (#/...) are");
  std::string p;  // the fragment, %-decoded
  for (size_t i = 1; i < ref.size(); ++i) {
    if (ref[i] == '%' && i + 2 < ref.size() + 0 && std::isxdigit(uint8_t(ref[i + 1])) &&
        std::isxdigit(uint8_t(ref[i + 2]))) {
      p += char(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      p += ref[i];
    }
  }
  if (!p.empty() && p[0] != '/') fail(where, "$ref '" + ref + "' is not supported: anchors ($anchor, $id) are not");
  try {
    const ojson& target = doc.root->at(nlohmann::json_pointer<std::string>(p));
    return {p, &target};
  } catch (const ojson::exception&) {
    fail(where, "$ref '" + ref + "' points to nothing in the schema");
  }
}

Conjunction additional_conj(const SchemaDoc& doc, const Node& n) {
  if (n.additional) return *n.additional;
  if (doc.opt.strict && n.has_object_keyword) return {{"#false", &false_schema()}};
  return {};
}

Conjunction extra_items_conj(const SchemaDoc& doc, const Node& n) {
  if (n.items) return *n.items;
  if (doc.opt.strict && !n.prefix.empty()) return {{"#false", &false_schema()}};
  return {};
}

bool allows_nothing(const Conjunction& c) {
  return std::any_of(c.begin(), c.end(), [](const Conjunct& x) {
    return x.ptr == "#false" || (x.schema->is_boolean() && !x.schema->get<bool>());
  });
}

Conjunction follow_pure_refs(const SchemaDoc& doc, const Conjunction& c) {
  Conjunction out;
  for (Conjunct x : c) {
    for (size_t hops = 0; hops < 64; ++hops) {  // a longer chain is left to build_node's cycle check
      const ojson& s = *x.schema;
      if (!s.is_object() || !s.contains("$ref") || !s["$ref"].is_string()) break;
      bool pure = std::all_of(s.items().begin(), s.items().end(), [](const auto& kv) {
        return kv.key() == "$ref" || annotation_keywords().count(kv.key());
      });
      if (!pure && !doc.refs_ignore_siblings) break;
      Conjunct next = resolve_ref(doc, s["$ref"].get<std::string>(), x.ptr);
      if (next.ptr == x.ptr) break;
      x = next;
    }
    add_conjunct(out, x);
  }
  return out;
}

bool is_trivial(const Node& n) {
  return n.types == kAllTypes && !n.values && n.min_length == 0 && n.max_length < 0 && !n.pattern && !n.format &&
         !n.lo && !n.hi && n.prefix.empty() && !n.items && n.min_items == 0 && n.max_items < 0 && n.props.empty() &&
         n.required.empty() && !n.additional && !n.has_object_keyword && n.groups.empty();
}

Node build_node(const SchemaDoc& doc, const Conjunction& c) {
  NodeBuilder b(doc);
  Node n;
  n.ptr = c.empty() ? std::string() : c.front().ptr;
  for (const Conjunct& x : c) {
    if (x.ptr == "#false") {
      n.types = 0, n.values = std::vector<ojson>{};
      continue;
    }
    b.add(n, x);
  }
  return n;
}

void merge_nodes(Node& a, const Node& b) {
  a.types &= b.types;
  if (b.values) {
    if (!a.values)
      a.values = b.values;
    else {
      std::vector<ojson> keep;
      for (const ojson& v : *a.values)
        if (std::find(b.values->begin(), b.values->end(), v) != b.values->end()) keep.push_back(v);
      a.values = std::move(keep);
    }
  }
  a.min_length = std::max(a.min_length, b.min_length);
  if (b.max_length >= 0) a.max_length = a.max_length < 0 ? b.max_length : std::min(a.max_length, b.max_length);
  auto same = [&](std::optional<std::string>& x, std::string& xp, const std::optional<std::string>& y,
                  const std::string& yp, const char* kw) {
    if (!y) return;
    if (x && *x != *y)
      fail(yp, std::string("two different '") + kw + "' constraints apply here (the other at '#" + xp +
                   "'): their intersection is not supported");
    x = y, xp = yp;
  };
  same(a.pattern, a.pattern_ptr, b.pattern, b.pattern_ptr, "pattern");
  same(a.format, a.format_ptr, b.format, b.format_ptr, "format");
  if (b.lo) tighten_lo(a, *b.lo);
  if (b.hi) tighten_hi(a, *b.hi);
  // arrays: position i is constrained by both sides' prefix[i], or their `items` past their prefix
  size_t np = std::max(a.prefix.size(), b.prefix.size());
  if (np) {
    std::vector<Conjunction> prefix(np);
    for (size_t i = 0; i < np; ++i) {
      if (i < a.prefix.size())
        concat(prefix[i], a.prefix[i]);
      else if (a.items)
        concat(prefix[i], *a.items);
      if (i < b.prefix.size())
        concat(prefix[i], b.prefix[i]);
      else if (b.items)
        concat(prefix[i], *b.items);
    }
    // A side with a shorter prefix and no `items`, in strict mode, allows nothing past its prefix:
    // that is decided when emitting (prefix length vs items), so keep the shorter side's limit.
    a.prefix = std::move(prefix);
  }
  if (b.items) {
    if (!a.items)
      a.items = b.items;
    else
      concat(*a.items, *b.items);
  }
  a.min_items = std::max(a.min_items, b.min_items);
  if (b.max_items >= 0) a.max_items = a.max_items < 0 ? b.max_items : std::min(a.max_items, b.max_items);
  // objects: a property is constrained by both sides' `properties`, or their additionalProperties
  // (Named copies, not structured bindings, in the lambdas: clang 14 cannot capture bindings.)
  for (auto& prop : a.props) {
    const std::string& name = prop.first;
    auto it = std::find_if(b.props.begin(), b.props.end(), [&](const auto& p) { return p.first == name; });
    if (it != b.props.end())
      concat(prop.second, it->second);
    else if (b.additional)
      concat(prop.second, *b.additional);
  }
  for (const auto& prop : b.props) {
    const std::string& name = prop.first;
    if (std::any_of(a.props.begin(), a.props.end(), [&](const auto& p) { return p.first == name; })) continue;
    Conjunction c = prop.second;
    if (a.additional) concat(c, *a.additional);
    a.props.push_back({name, std::move(c)});
  }
  for (const std::string& r : b.required)
    if (std::find(a.required.begin(), a.required.end(), r) == a.required.end()) a.required.push_back(r);
  if (b.additional) {
    if (!a.additional)
      a.additional = b.additional;
    else
      concat(*a.additional, *b.additional);
  }
  a.has_object_keyword |= b.has_object_keyword;
  a.groups.insert(a.groups.end(), b.groups.begin(), b.groups.end());
}

}  // namespace nanovllm::structured::detail
