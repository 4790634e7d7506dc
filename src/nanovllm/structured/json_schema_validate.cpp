// Checks a JSON value against a Node (json_schema_node.h), with the emitter's semantics (strict
// mode included). The converter uses it to keep only the `enum` / `const` values that the rest of
// the schema allows, since a value list cannot be intersected with a grammar.
#include <algorithm>
#include <cmath>

#include "nanovllm/structured/json_schema_node.h"

namespace nanovllm::structured::detail {

namespace {

uint8_t type_of(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return kNull;
    case ojson::value_t::boolean: return kBoolean;
    case ojson::value_t::object: return kObject;
    case ojson::value_t::array: return kArray;
    case ojson::value_t::string: return kString;
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return kInteger;
    case ojson::value_t::number_float: {
      double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? kInteger : kFraction;
    }
    default: return 0;
  }
}

bool within(const Decimal& x, const Node& n) {
  if (n.lo) {
    int c = compare(x, n.lo->value);
    if (c < 0 || (c == 0 && n.lo->exclusive)) return false;
  }
  if (n.hi) {
    int c = compare(x, n.hi->value);
    if (c > 0 || (c == 0 && n.hi->exclusive)) return false;
  }
  return true;
}

bool conj_accepts(const SchemaDoc& doc, const Conjunction& c, const ojson& v, int depth) {
  if (c.empty()) return true;
  return node_accepts(doc, build_node(doc, c), v, depth + 1);
}

}  // namespace

int64_t code_point_length(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool node_accepts(const SchemaDoc& doc, const Node& n, const ojson& v, int depth) {
  if (depth > doc.opt.max_depth) throw GrammarError("JSON schema at '#" + n.ptr + "': enum value nested too deeply");
  uint8_t t = type_of(v);
  if (!(n.types & t)) return false;
  if (n.values && std::find(n.values->begin(), n.values->end(), v) == n.values->end()) return false;
  for (const auto& group : n.groups) {
    bool any = false;
    for (const Conjunction& alt : group) any = any || conj_accepts(doc, alt, v, depth);
    if (!any) return false;
  }
  if (t == kString) {
    const std::string& s = v.get_ref<const std::string&>();
    int64_t len = code_point_length(s);
    if (len < n.min_length || (n.max_length >= 0 && len > n.max_length)) return false;
    if (n.pattern)
      throw GrammarError("JSON schema at '#" + n.pattern_ptr + "': 'pattern' beside 'enum' / 'const' is not supported");
    if (n.format)
      throw GrammarError("JSON schema at '#" + n.format_ptr + "': 'format' beside 'enum' / 'const' is not supported");
  } else if (t == kInteger || t == kFraction) {
    if (!within(Decimal::from_json(v), n)) return false;
  } else if (t == kArray) {
    int64_t size = int64_t(v.size());
    if (size < n.min_items || (n.max_items >= 0 && size > n.max_items)) return false;
    Conjunction extra = extra_items_conj(doc, n);
    for (size_t i = 0; i < v.size(); ++i) {
      const Conjunction& c = i < n.prefix.size() ? n.prefix[i] : extra;
      if (allows_nothing(c) || !conj_accepts(doc, c, v[i], depth)) return false;
    }
  } else if (t == kObject) {
    for (const std::string& r : n.required)
      if (!v.contains(r)) return false;
    Conjunction extra = additional_conj(doc, n);
    for (auto it = v.begin(); it != v.end(); ++it) {
      auto p = std::find_if(n.props.begin(), n.props.end(), [&](const auto& x) { return x.first == it.key(); });
      const Conjunction& c = p != n.props.end() ? p->second : extra;
      if (allows_nothing(c) || !conj_accepts(doc, c, it.value(), depth)) return false;
    }
  }
  return true;
}

}  // namespace nanovllm::structured::detail
