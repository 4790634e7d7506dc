// Filters (`x | name(args)`) and tests (`x is name`). Where @huggingface/jinja implements a filter
// we follow it exactly (it is our reference); the extra filters it lacks (d, count, round,
// select/reject, map by filter, escape, min/max, ...) follow Python Jinja.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "nanovllm/jinja/interpreter.h"
#include "nanovllm/jinja/text.h"

namespace nanovllm::jinja {
namespace {

[[noreturn]] void cannot(const std::string& filter, const Value& v) {
  throw RuntimeError("filter '" + filter + "' cannot be applied to " + v.type_name());
}

bool bool_arg(const Args& a, size_t i, const std::string& name, bool dflt) {
  const Value* v = a.get(i, name);
  if (!v) return dflt;
  if (!v->is(Kind::Bool)) throw RuntimeError("'" + name + "' must be a boolean");
  return v->as_bool();
}

// Attribute path "a.b.0" as used by map/sort/selectattr.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_mapping_like()) {
      const Value* f = v.object().find(part);
      v = f ? *f : Value();
    } else if (v.is(Kind::Array)) {
      char* end = nullptr;
      long long i = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end || i < 0 || i >= static_cast<long long>(v.array().size())) return Value();
      v = v.array()[static_cast<size_t>(i)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

// Ordering used by sort/dictsort/min/max: numbers (and booleans) together, strings together.
int compare(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  bool an = a.is_number() || a.is(Kind::Bool), bn = b.is_number() || b.is(Kind::Bool);
  if (an && bn) return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
  if (a.is(Kind::String) && b.is(Kind::String)) {
    std::string x = case_sensitive ? a.str() : to_lower(a.str()), y = case_sensitive ? b.str() : to_lower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  throw RuntimeError(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
}

std::string join_item(const Value& v) { return v.is_none() || v.is_undefined() ? "" : v.to_js_string(); }

// JavaScript parseInt(s, 10) / parseFloat(s): leading number, NaN if none.
bool parse_leading_number(const std::string& raw, bool integer, double& out) {
  std::string s = js_trim_start(raw);
  const char* p = s.c_str();
  char* end = nullptr;
  if (integer) {
    long long v = std::strtoll(p, &end, 10);
    out = static_cast<double>(v);
  } else {
    if (s.rfind("Infinity", 0) == 0 || s.rfind("+Infinity", 0) == 0) {
      out = INFINITY;
      return true;
    }
    if (s.rfind("-Infinity", 0) == 0) {
      out = -INFINITY;
      return true;
    }
    if (s.size() > 1 && (s[1] == 'x' || s[1] == 'X')) s = s.substr(0, 1);  // no hex floats in JS
    p = s.c_str();
    out = std::strtod(p, &end);
    std::string lower = to_lower(std::string(p, static_cast<const char*>(end)));
    if (lower.find("inf") != std::string::npos || lower.find("nan") != std::string::npos) return false;
  }
  return end != p;
}

Value js_replace(const std::string& s, const Args& a) {
  if (a.pos.size() < 2 || !a.pos[0].is(Kind::String) || !a.pos[1].is(Kind::String))
    throw RuntimeError("replace() needs two string arguments");
  const std::string &from = a.pos[0].str(), &to = a.pos[1].str();
  const Value* c = a.get(2, "count");
  if (c && !c->is(Kind::Int) && !c->is_none()) throw RuntimeError("replace() count must be an integer");
  int64_t remaining = c && c->is(Kind::Int) && c->as_int() >= 0 ? c->as_int() : INT64_MAX;
  std::string out;
  if (from.empty()) {  // insert `to` at every code point boundary
    auto chars = split_code_points(s);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i < chars.size()) out += chars[i];
      check_built(out, "replace");
    }
    return Value(out);
  }
  size_t i = 0;
  while (remaining > 0) {
    size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i).append(to);
    check_built(out, "replace");
    i = j + from.size();
    --remaining;
  }
  return Value(out + s.substr(i));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value to_json_filter(const Value& v, const Args& a) {
  JsonOptions opt;
  if (const Value* ind = a.get(0, "indent")) {
    if (!ind->is(Kind::Int) && !ind->is_none()) throw RuntimeError("tojson: indent must be an integer");
    opt.indent = ind->is(Kind::Int) ? static_cast<int>(std::clamp<int64_t>(ind->as_int(), 0, 64)) : 0;
  }
  opt.ensure_ascii = bool_arg(a, 99, "ensure_ascii", false);
  opt.sort_keys = bool_arg(a, 99, "sort_keys", false);
  if (const Value* sep = a.kwarg("separators"); sep && !sep->is_none()) {
    if (!sep->is(Kind::Array) || sep->array().size() != 2 || !sep->array()[0].is(Kind::String) ||
        !sep->array()[1].is(Kind::String))
      throw RuntimeError("tojson: separators must be a pair of strings");
    opt.has_separators = true;
    opt.item_sep = sep->array()[0].str();
    opt.key_sep = sep->array()[1].str();
  }
  return Value(to_json(v, opt));
}

Value array_filter(const std::string& name, const Value& v, const Args& a) {
  const Array& xs = v.array();
  if (name == "list") return v;
  if (name == "first") return xs.empty() ? Value() : xs.front();
  if (name == "last") return xs.empty() ? Value() : xs.back();
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(xs.size()));
  if (name == "reverse") return Value(Array(xs.rbegin(), xs.rend()));
  if (name == "string") {
    JsonOptions opt;
    opt.undefined_as_null = false;
    return Value(to_json(v, opt));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "separator");
    if (sep && !sep->is(Kind::String)) throw RuntimeError("join: separator must be a string");
    std::string out;
    for (size_t i = 0; i < xs.size(); ++i) {
      out += (i && sep ? sep->str() : "") + join_item(xs[i]);
      check_built(out, "join");
    }
    return Value(out);
  }
  if (name == "unique") {
    Array out;
    for (const auto& x : xs)
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return strict_equals(x, y); })) out.push_back(x);
    return Value(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max") {
    bool reverse = name == "sort" && bool_arg(a, 0, "reverse", false);
    bool cs = bool_arg(a, name == "sort" ? 1 : 0, "case_sensitive", false);
    const Value* attr = a.get(name == "sort" ? 2 : 1, "attribute");
    auto key = [&](const Value& x) {
      if (!attr || attr->is_none()) return x;
      return attribute_path(x, attr->is(Kind::Int) ? std::to_string(attr->as_int()) : attr->to_output());
    };
    Array out = xs;
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      int c = compare(key(x), key(y), cs);
      return reverse ? c > 0 : c < 0;
    });
    if (name == "sort") return Value(std::move(out));
    if (out.empty()) return Value();
    return name == "min" ? out.front() : out.back();
  }
  if (name == "sum") {
    Value total(static_cast<int64_t>(0));
    for (const auto& x : xs) {
      if (!x.is_number() && !x.is(Kind::Bool)) throw RuntimeError("sum: items must be numbers");
      total = total.is(Kind::Int) && x.is(Kind::Int) ? Value(total.as_int() + x.as_int())
                                                     : Value(total.as_double() + x.as_double());
    }
    return total;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    bool by_attr = name.size() > 6, keep = name[0] == 's';
    size_t base = by_attr ? 1 : 0;
    if (by_attr && (a.pos.empty() || !a.pos[0].is(Kind::String)))
      throw RuntimeError(name + ": attribute name must be a string");
    Args test_args;
    for (size_t i = base + 1; i < a.pos.size(); ++i) test_args.pos.push_back(a.pos[i]);
    Array out;
    for (const auto& x : xs) {
      if (by_attr && !x.is_mapping_like()) throw RuntimeError(name + " can only be applied to a list of objects");
      Value subject = by_attr ? attribute_path(x, a.pos[0].str()) : x;
      bool pass;
      if (a.pos.size() > base) {
        if (!a.pos[base].is(Kind::String)) throw RuntimeError(name + ": test name must be a string");
        pass = (by_attr && subject.is_undefined()) ? false : apply_test(a.pos[base].str(), subject, test_args);
      } else {
        pass = subject.truthy();
      }
      if (pass == keep) out.push_back(x);
    }
    return Value(std::move(out));
  }
  if (name == "map") {
    Array out;
    if (const Value* attr = a.kwarg("attribute")) {
      if (!attr->is(Kind::String)) throw RuntimeError("map: attribute must be a string");
      const Value* dflt = a.kwarg("default");
      for (const auto& x : xs) {
        if (!x.is_mapping_like()) throw RuntimeError("map: items must be objects");
        Value r = attribute_path(x, attr->str());
        out.push_back(r.is_undefined() && dflt ? *dflt : r);
      }
    } else {
      if (a.pos.empty() || !a.pos[0].is(Kind::String)) throw RuntimeError("map: needs attribute=... or a filter name");
      Args rest;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      for (const auto& x : xs) out.push_back(apply_filter(a.pos[0].str(), x, rest, !rest.pos.empty()));
    }
    return Value(std::move(out));
  }
  cannot(name, v);
}

Value string_filter(const std::string& name, const Value& v, const Args& a, bool has_call) {
  const std::string& s = v.str();
  if (name == "length" || name == "count") return Value(utf16_length(s));
  if (name == "upper") return Value(to_upper(s));
  if (name == "lower") return Value(to_lower(s));
  if (name == "title") return Value(title_case(s));
  if (name == "capitalize") return Value(capitalize(s));
  if (name == "trim") return Value(js_trim(s));
  if (name == "string") return v;
  if (name == "join") {
    if (!has_call) return v;
    const Value* sep = a.get(0, "separator");
    if (sep && !sep->is(Kind::String)) throw RuntimeError("join: separator must be a string");
    auto chars = split_code_points(s);
    std::string out;
    for (size_t i = 0; i < chars.size(); ++i) {
      out += (i && sep ? sep->str() : "") + chars[i];
      check_built(out, "join");
    }
    return Value(out);
  }
  if (name == "indent") {
    const Value* w = a.get(0, "width");
    if (w && !w->is(Kind::Int) && !w->is(Kind::String)) throw RuntimeError("indent: width must be an integer");
    std::string pad = !w                    ? "    "
                      : w->is(Kind::String) ? w->str()
                                            : std::string(std::clamp<int64_t>(w->as_int(), 0, 1024), ' ');
    bool first = a.get(1, "first") && a.get(1, "first")->truthy();
    bool blank = a.get(2, "blank") && a.get(2, "blank")->truthy();
    std::string out, line;
    size_t i = 0, n = 0;
    while (true) {
      size_t j = s.find('\n', i);
      line = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (n) out += '\n';
      if (!((!first && n == 0) || (!blank && line.empty()))) out += pad;
      out += line;
      check_built(out, "indent");
      ++n;
      if (j == std::string::npos) break;
      i = j + 1;
    }
    return Value(out);
  }
  if (name == "int" || name == "float") {
    double d;
    if (!parse_leading_number(s, name == "int", d)) {
      if (const Value* dflt = a.get(0, "default")) return *dflt;
      return name == "int" ? Value(static_cast<int64_t>(0)) : Value(0.0);
    }
    return name == "int" ? Value(static_cast<int64_t>(d)) : Value(d);
  }
  if (name == "replace") return js_replace(s, a);
  if (name == "e" || name == "escape") return Value(html_escape(s));
  if (name == "list") {
    Array out;
    for (auto& c : split_code_points(s)) out.emplace_back(std::move(c));
    return Value(std::move(out));
  }
  if (name == "reverse") {
    auto chars = split_code_points(s);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value(out);
  }
  if (name == "first" || name == "last") {
    auto chars = split_code_points(s);
    if (chars.empty()) return Value();
    return Value(name == "first" ? chars.front() : chars.back());
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
      size_t sp = js_space_len_at(s, i);
      if (sp) {
        in_word = false;
        i += sp;
        continue;
      }
      if (!in_word) ++words;
      in_word = true;
      next_code_point(s, i);
    }
    return Value(words);
  }
  cannot(name, v);
}

Value number_filter(const std::string& name, const Value& v, const Args& a, bool has_call) {
  bool is_int = v.is(Kind::Int);
  if (name == "abs") return is_int ? Value(v.as_int() < 0 ? -v.as_int() : v.as_int()) : Value(std::fabs(v.as_double()));
  // HF: `x|int` floors a float, while `x|int(...)` returns numbers unchanged.
  if (name == "int") return has_call || is_int ? v : Value(static_cast<int64_t>(std::floor(v.as_double())));
  if (name == "float") return Value(v.as_double());
  if (name == "string") return Value(v.to_output());
  if (name == "e" || name == "escape") return Value(v.to_output());
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const Value* m = a.get(1, "method");
    int64_t prec = p && p->is(Kind::Int) ? p->as_int() : 0;
    std::string method = m && m->is(Kind::String) ? m->str() : "common";
    double scale = std::pow(10.0, static_cast<double>(prec)), x = v.as_double() * scale;
    double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
    return Value(r / scale);
  }
  cannot(name, v);
}

Value object_filter(const std::string& name, const Value& v, const Args& a) {
  const Object& o = v.object();
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(o.items.size()));
  if (name == "items" || name == "dictsort") {
    Array out;
    for (const auto& [k, x] : o.items) out.push_back(Value(Array{Value(k), x}));
    if (name == "items") return Value(std::move(out));
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    if (by && (!by->is(Kind::String) || (by->str() != "key" && by->str() != "value")))
      throw RuntimeError("dictsort: 'by' must be 'key' or 'value'");
    size_t idx = by && by->str() == "value" ? 1 : 0;
    bool reverse = bool_arg(a, 2, "reverse", false);
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      int c = compare(x.array()[idx], y.array()[idx], cs);
      return reverse ? c > 0 : c < 0;
    });
    return Value(std::move(out));
  }
  if (name == "keys" || name == "list") {
    Array out;
    for (const auto& kv : o.items) out.emplace_back(kv.first);
    return Value(std::move(out));
  }
  if (name == "values") {
    Array out;
    for (const auto& kv : o.items) out.push_back(kv.second);
    return Value(std::move(out));
  }
  cannot(name, v);
}

const std::set<std::string, std::less<>>& known_filters() {
  static const std::set<std::string, std::less<>> names = {
      "safe",       "tojson",   "default", "d",       "list",  "first",  "last",      "length",     "count",
      "reverse",    "string",   "join",    "unique",  "sort",  "min",    "max",       "sum",        "selectattr",
      "rejectattr", "select",   "reject",  "map",     "upper", "lower",  "title",     "capitalize", "trim",
      "indent",     "int",      "float",   "replace", "e",     "escape", "wordcount", "abs",        "round",
      "items",      "dictsort", "keys",    "values",  "bool"};
  return names;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const Args& a, bool has_call) {
  if (!known_filters().count(name)) throw RuntimeError("unknown filter '" + name + "'");
  if (name == "safe") return v;
  if (name == "tojson") return to_json_filter(v, a);
  if (name == "default" || name == "d") {
    const Value* dflt = a.get(0, "default_value");
    bool boolean = bool_arg(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt ? *dflt : Value("");
    return v;
  }
  switch (v.kind()) {
    case Kind::Array: return array_filter(name, v, a);
    case Kind::String: return string_filter(name, v, a, has_call);
    case Kind::Int:
    case Kind::Float: return number_filter(name, v, a, has_call);
    case Kind::Object: return object_filter(name, v, a);
    case Kind::Bool:
      if (name == "bool") return v;
      if (name == "int") return Value(static_cast<int64_t>(v.as_bool()));
      if (name == "float") return Value(v.as_bool() ? 1.0 : 0.0);
      if (name == "string") return Value(v.to_output());
      cannot(name, v);
    default: cannot(name, v);
  }
}

bool apply_test(const std::string& name, const Value& v, const Args& a) {
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) throw RuntimeError("test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is(Kind::Bool);
  if (name == "true") return v.is(Kind::Bool) && v.as_bool();
  if (name == "false") return v.is(Kind::Bool) && !v.as_bool();
  if (name == "string") return v.is(Kind::String);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Kind::Int);
  if (name == "float") return v.is(Kind::Float);
  if (name == "mapping") return v.is(Kind::Object);
  if (name == "iterable") return v.is(Kind::Array) || v.is(Kind::String);
  if (name == "sequence") return v.is(Kind::Array) || v.is(Kind::Object) || v.is(Kind::String);
  if (name == "callable") return v.is(Kind::Function);
  if (name == "lower") return v.is(Kind::String) && v.str() == to_lower(v.str());
  if (name == "upper") return v.is(Kind::String) && v.str() == to_upper(v.str());
  if (name == "odd" || name == "even") {
    if (!v.is(Kind::Int)) throw RuntimeError("test '" + name + "' needs an integer, got " + v.type_name());
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = arg();
    if (!v.is(Kind::Int) || !d.is(Kind::Int) || d.as_int() == 0)
      throw RuntimeError("divisibleby needs nonzero integers");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "sameas")
    return a.pos.empty() ? v.is_undefined() : strict_equals(v, a.pos[0]);
  if (name == "ne") return !loose_equals(v, arg());
  if (name == "in") {
    Args fa;
    const Value& c = arg();
    if (c.is(Kind::Array))
      return std::any_of(c.array().begin(), c.array().end(), [&](const Value& x) { return strict_equals(x, v); });
    if (c.is(Kind::String) && v.is(Kind::String)) return c.str().find(v.str()) != std::string::npos;
    if (c.is(Kind::Object) && v.is(Kind::String)) return c.object().find(v.str()) != nullptr;
    return false;
  }
  if (name == "gt" || name == "lt" || name == "ge" || name == "le" || name == "greaterthan" || name == "lessthan") {
    int c = compare(v, arg(), true);
    if (name == "gt" || name == "greaterthan") return c > 0;
    if (name == "lt" || name == "lessthan") return c < 0;
    return name == "ge" ? c >= 0 : c <= 0;
  }
  throw RuntimeError("unknown test '" + name + "'");
}

}  // namespace nanovllm::jinja
