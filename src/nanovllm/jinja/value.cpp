// Value: truthiness, printing, JSON conversion and the two JavaScript equalities.
#include "nanovllm/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "nanovllm/jinja/text.h"

namespace nanovllm::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* Args::kwarg(const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* Args::get(size_t i, const std::string& name) const { return i < pos.size() ? &pos[i] : kwarg(name); }

Value::~Value() {
  // Fast path: nothing owned alone, or only scalars inside (no nesting to unwind).
  bool nested = false;
  if (arr_ && arr_.use_count() == 1)
    for (const auto& e : *arr_) nested = nested || e.is_container();
  if (obj_ && obj_.use_count() == 1)
    for (const auto& kv : obj_->items) nested = nested || kv.second.is_container();
  if (!nested) return;
  std::vector<Value> pending;
  release_into(pending);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    v.release_into(pending);
  }  // each v goes with its container emptied: no destructor below recurses
}

void Value::release_into(std::vector<Value>& out) {
  if (arr_ && arr_.use_count() == 1) {
    for (auto& e : *arr_) out.push_back(std::move(e));
    arr_->clear();
  }
  if (obj_ && obj_.use_count() == 1) {
    for (auto& kv : obj_->items) out.push_back(std::move(kv.second));
    obj_->items.clear();
  }
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::Array: return arr_.get();
    case Kind::Object:
    case Kind::Namespace: return obj_.get();
    case Kind::Function: return fn_.get();
    default: return nullptr;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0 && !std::isnan(f_);
    case Kind::String: return !s_->empty();
    case Kind::Array: return !arr_->empty();
    case Kind::Object: return !obj_->items.empty();
    default: return true;  // namespaces and functions are objects in JavaScript
  }
}

const char* Value::type_name() const {
  static constexpr const char* names[] = {"UndefinedValue", "NullValue",    "BooleanValue", "IntegerValue",
                                          "FloatValue",     "StringValue",  "ArrayValue",   "ObjectValue",
                                          "NamespaceValue", "FunctionValue"};
  return names[static_cast<int>(kind_)];
}

namespace {
// RuntimeValue.toString() in JavaScript, where null and undefined do print.
std::string runtime_to_string(const Value& v) {
  if (v.is_none()) return "null";
  if (v.is_undefined()) return "undefined";
  return v.to_output();
}
}  // namespace

std::string Value::to_output() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return "";
    case Kind::Bool: return b_ ? "true" : "false";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float:
      if (f_ == 0 && std::signbit(f_)) return "-0.0";
      if (std::isfinite(f_) && std::fabs(f_) < 1e21 && f_ == std::floor(f_)) return js_number(f_) + ".0";
      return js_number(f_);
    case Kind::String: return *s_;
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: {
      JsonOptions opt;
      opt.undefined_as_null = false;
      return to_json(*this, opt);
    }
    case Kind::Function: return "[function]";
  }
  return "";
}

std::string Value::to_js_string() const {
  switch (kind_) {
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return js_number(f_);
    case Kind::Array: {
      std::string out;
      for (size_t k = 0; k < arr_->size(); ++k) {
        if (k) out += ',';
        out += runtime_to_string((*arr_)[k]);
        check_built(out, "string of a list");
      }
      return out;
    }
    case Kind::Object:
    case Kind::Namespace: return "[object Map]";
    default: return runtime_to_string(*this);
  }
}

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth) throw RuntimeError("input nested deeper than " + std::to_string(kMaxValueDepth));
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u)) : Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: {
      double d = j.get<double>();
      if (d == std::floor(d) && std::fabs(d) < 9e15) return Value(static_cast<int64_t>(d));
      return Value(d);
    }
    case nlohmann::json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e, depth + 1));
      return Value(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      Object o;
      o.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) o.items.emplace_back(k, from_json(e, depth + 1));
      return Value(std::move(o));
    }
    default: return Value();  // binary / discarded: nothing a template can use
  }
}

namespace {
// `used`: bytes built and copied so far by the whole call (each level copies its items, and a
// container costs kContainerWork for its allocations), so that a list holding one list many
// times stops at kMaxBuiltString however it nests.
constexpr size_t kContainerWork = 64;
std::string to_json_bounded(const Value& v, const JsonOptions& opt, int depth, size_t& used) {
  auto add = [&used](size_t n) {
    used += n;
    if (used > kMaxBuiltString)
      throw RuntimeError("tojson: result too large (past " + std::to_string(kMaxBuiltString) +
                         " bytes built and copied)");
  };
  auto counted = [&add](std::string s) {
    add(s.size());
    return s;
  };
  if (depth > kMaxValueDepth) throw RuntimeError("tojson: value nested deeper than " + std::to_string(kMaxValueDepth));
  std::string item_sep = opt.has_separators ? opt.item_sep : opt.indent > 0 ? "," : ", ";
  std::string key_sep = opt.has_separators ? opt.key_sep : ": ";
  switch (v.kind()) {
    case Kind::None: return counted("null");
    case Kind::Undefined: return counted(opt.undefined_as_null ? "null" : "undefined");
    case Kind::Bool: return counted(v.as_bool() ? "true" : "false");
    case Kind::Int: return counted(std::to_string(v.as_int()));
    case Kind::Float: return counted(std::isfinite(v.as_double()) ? js_number(v.as_double()) : "null");
    case Kind::String: return counted(json_quote(v.str(), opt.ensure_ascii));
    case Kind::Function: throw RuntimeError("Cannot convert to JSON: FunctionValue");
    default: break;
  }
  std::string pad = opt.indent > 0 ? std::string(opt.indent, ' ') : "";
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += pad;
  std::string child = base + pad;
  std::vector<std::string> core;
  bool is_array = v.is(Kind::Array);
  if (is_array) {
    for (const auto& e : v.array()) core.push_back(to_json_bounded(e, opt, depth + 1, used));
  } else {
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& kv : v.object().items) entries.push_back(&kv);
    if (opt.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    for (const auto* kv : entries) {
      std::string s =
          json_quote(kv->first, opt.ensure_ascii) + key_sep + to_json_bounded(kv->second, opt, depth + 1, used);
      core.push_back(opt.indent > 0 ? child + s : s);
    }
  }
  std::string out(1, is_array ? '[' : '{');
  bool pretty = opt.indent > 0 && !core.empty();
  if (pretty && is_array) out += child;
  for (size_t k = 0; k < core.size(); ++k) {
    if (k) out += pretty && is_array ? item_sep + child : item_sep;
    out += core[k];
  }
  if (pretty) out += base;
  out += is_array ? ']' : '}';
  add(kContainerWork + out.size());  // each level copies what it holds: the cost of deep nesting
  return out;
}
}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt, int depth) {
  size_t used = 0;
  return to_json_bounded(v, opt, depth, used);
}

namespace {
// JavaScript's ToNumber on a string: trimmed decimal (or 0x/0o/0b) literal, "" -> 0, else NaN.
double js_string_to_number(const std::string& raw) {
  std::string s = js_trim(raw);
  if (s.empty()) return 0;
  if (s == "Infinity" || s == "+Infinity") return INFINITY;
  if (s == "-Infinity") return -INFINITY;
  if (s.size() > 2 && s[0] == '0' &&
      (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    char* end = nullptr;
    double r = static_cast<double>(std::strtoull(s.c_str() + 2, &end, base));
    return *end ? NAN : r;
  }
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return NAN;
  char* end = nullptr;
  double r = std::strtod(s.c_str(), &end);
  return *end ? NAN : r;
}

bool is_primitive(const Value& v) { return v.is(Kind::Bool) || v.is_number() || v.is(Kind::String); }
}  // namespace

bool strict_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Bool: return a.as_bool() == b.as_bool();
    case Kind::String: return a.str() == b.str();
    default: return a.identity() == b.identity();
  }
}

bool loose_equals(const Value& a, const Value& b) {
  bool a_nullish = a.is_undefined() || a.is_none(), b_nullish = b.is_undefined() || b.is_none();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (a.kind() == b.kind() || (a.is_number() && b.is_number())) return strict_equals(a, b);
  if (!is_primitive(a) || !is_primitive(b)) return false;
  // Mixed primitives: both sides become numbers (strings parse, booleans are 0/1).
  auto num = [](const Value& v) { return v.is(Kind::String) ? js_string_to_number(v.str()) : v.as_double(); };
  return num(a) == num(b);
}

}  // namespace nanovllm::jinja
