// Attributes and methods of values (str.startswith, dict.items, ...) and the global functions
// (range, namespace, dict, raise_exception, strftime_now). Method semantics follow
// @huggingface/jinja, including its quirks: strip/lstrip/rstrip ignore their argument and trim
// all whitespace.
#include <algorithm>
#include <ctime>

#include "nanovllm/jinja/interpreter.h"
#include "nanovllm/jinja/text.h"

namespace nanovllm::jinja {
namespace {

Value method(std::function<Value(Args&)> f) {
  return Value(Function([f = std::move(f)](Args& a, const EnvPtr&) { return f(a); }));
}

// s.startswith(x) / s.endswith(x) with x a string or a list of strings.
Value affix_test(const std::string& s, const Args& a, bool prefix) {
  const char* fn = prefix ? "startswith" : "endswith";
  if (a.pos.empty()) throw RuntimeError(std::string(fn) + "() requires an argument");
  auto test = [&](const Value& p) {
    if (!p.is(Kind::String)) throw RuntimeError(std::string(fn) + "() argument must be a string or list of strings");
    const std::string& x = p.str();
    return x.size() <= s.size() &&
           (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (a.pos[0].is(Kind::Array)) {
    for (const auto& p : a.pos[0].array())
      if (test(p)) return Value(true);
    return Value(false);
  }
  return Value(test(a.pos[0]));
}

// Python's str.split(sep=None, maxsplit=-1).
Value split(const std::string& s, const Args& a) {
  const Value* sep = a.get(0, "sep");
  const Value* max = a.get(1, "maxsplit");
  int64_t maxsplit = max && max->is(Kind::Int) ? max->as_int() : -1;
  Array out;
  if (!sep || sep->is_none()) {
    std::string rest = js_trim_start(s);
    size_t i = 0;
    while (i < rest.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(rest.substr(i));
        break;
      }
      size_t j = i;
      while (j < rest.size() && !js_space_len_at(rest, j)) ++j;
      out.emplace_back(rest.substr(i, j - i));
      i = j;
      while (size_t n = js_space_len_at(rest, i)) i += n;
    }
    return Value(std::move(out));
  }
  if (!sep->is(Kind::String)) throw RuntimeError("split() separator must be a string or none");
  const std::string& d = sep->str();
  if (d.empty()) throw RuntimeError("split(): empty separator");
  size_t i = 0;
  while (true) {
    size_t j = s.find(d, i);
    if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
      out.emplace_back(s.substr(i));
      break;
    }
    out.emplace_back(s.substr(i, j - i));
    i = j + d.size();
  }
  return Value(std::move(out));
}

Value string_attribute(const std::string& s, const std::string& name) {
  if (name == "length") return Value(utf16_length(s));
  if (name == "upper") return method([s](Args&) { return Value(to_upper(s)); });
  if (name == "lower") return method([s](Args&) { return Value(to_lower(s)); });
  if (name == "title") return method([s](Args&) { return Value(title_case(s)); });
  if (name == "capitalize") return method([s](Args&) { return Value(capitalize(s)); });
  if (name == "strip") return method([s](Args&) { return Value(js_trim(s)); });
  if (name == "lstrip") return method([s](Args&) { return Value(js_trim_start(s)); });
  if (name == "rstrip") return method([s](Args&) { return Value(js_trim_end(s)); });
  if (name == "startswith") return method([s](Args& a) { return affix_test(s, a, true); });
  if (name == "endswith") return method([s](Args& a) { return affix_test(s, a, false); });
  if (name == "split") return method([s](Args& a) { return split(s, a); });
  if (name == "replace") return method([s](Args& a) { return apply_filter("replace", Value(s), a, true); });
  if (name == "join") {  // Python's sep.join(items)
    return method([s](Args& a) {
      Args fa;
      fa.pos.push_back(Value(s));
      if (a.pos.empty()) throw RuntimeError("join() requires an argument");
      return apply_filter("join", a.pos[0], fa, true);
    });
  }
  if (name == "format") {  // only positional "{}" / "%s"-free placeholders: "{}" in order
    return method([s](Args& a) {
      std::string out;
      size_t arg = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '}') {
          if (arg >= a.pos.size()) throw RuntimeError("format(): not enough arguments");
          out += a.pos[arg++].to_output();
          check_built(out, "format");
          ++i;
        } else {
          out += s[i];
        }
      }
      return Value(out);
    });
  }
  return Value();
}

Value dict_attribute(const Value& obj, const std::string& name) {
  if (name == "get") {
    return method([obj](Args& a) {
      if (a.pos.empty() || !a.pos[0].is(Kind::String)) throw RuntimeError("get(): key must be a string");
      if (const Value* v = obj.object().find(a.pos[0].str())) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  }
  if (name == "items" || name == "keys" || name == "values" || name == "dictsort") {
    return method([obj, name](Args& a) { return apply_filter(name, obj, a, true); });
  }
  return Value();
}

}  // namespace

Value get_attribute(const Value& obj, const Value& key) {
  if (obj.is_mapping_like()) {
    if (!key.is(Kind::String))
      throw RuntimeError(std::string("cannot look up a ") + key.type_name() + " key in a mapping");
    if (const Value* v = obj.object().find(key.str())) return *v;
    return obj.is(Kind::Object) ? dict_attribute(obj, key.str()) : Value();
  }
  if (obj.is(Kind::Array) || obj.is(Kind::String)) {
    if (key.is(Kind::Int)) {
      int64_t i = key.as_int();
      if (obj.is(Kind::Array)) {
        int64_t n = static_cast<int64_t>(obj.array().size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.array()[static_cast<size_t>(i)] : Value();
      }
      auto chars = split_code_points(obj.str());
      int64_t n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? Value(chars[static_cast<size_t>(i)]) : Value();
    }
    if (!key.is(Kind::String)) throw RuntimeError(std::string("cannot index with a ") + key.type_name());
    if (obj.is(Kind::String)) return string_attribute(obj.str(), key.str());
    if (key.str() == "length") return Value(static_cast<int64_t>(obj.array().size()));
    return Value();
  }
  if (!key.is(Kind::String))
    throw RuntimeError(std::string("cannot index ") + obj.type_name() + " with " + key.type_name());
  return Value();  // attributes of undefined/none/numbers are undefined
}

void install_globals(Env& env, std::shared_ptr<std::vector<Value>> namespaces) {
  env.set("true", Value(true));
  env.set("false", Value(false));
  env.set("none", Value::none());
  env.set("True", Value(true));
  env.set("False", Value(false));
  env.set("None", Value::none());
  env.set("raise_exception", method([](Args& a) -> Value {
            throw RuntimeError(a.pos.empty() ? std::string("raise_exception() called") : a.pos[0].to_output());
          }));
  env.set("range", method([](Args& a) {
            for (const auto& v : a.pos)
              if (!v.is(Kind::Int)) throw RuntimeError("range() arguments must be integers");
            if (a.pos.empty() || a.pos.size() > 3) throw RuntimeError("range() takes 1 to 3 arguments");
            int64_t start = a.pos.size() > 1 ? a.pos[0].as_int() : 0;
            int64_t stop = a.pos.size() > 1 ? a.pos[1].as_int() : a.pos[0].as_int();
            int64_t step = a.pos.size() > 2 ? a.pos[2].as_int() : 1;
            if (step == 0) throw RuntimeError("range() step must not be zero");
            // Its length first (in 128 bits: stop - start may not fit 64), checked before allocating.
            constexpr int64_t kMaxRange = 1'000'000;
            const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
            const __int128 abs_step = step > 0 ? __int128(step) : -__int128(step);
            const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
            if (count > kMaxRange) throw RuntimeError("range() longer than 1000000 items");
            if (count > a.max_items)
              throw RuntimeError("template exceeded its work limit: range() of " + std::to_string(int64_t(count)) +
                                 " items is more than the " + std::to_string(std::max<int64_t>(a.max_items, 0)) +
                                 " it has left");
            Array out;
            out.reserve(size_t(count));
            for (int64_t i = 0; i < int64_t(count); ++i) out.emplace_back(int64_t(start + __int128(i) * step));
            return Value(std::move(out));
          }));
  env.set("namespace", method([namespaces](Args& a) {
            if (a.pos.size() > 1) throw RuntimeError("namespace() takes at most 1 positional argument");
            Object o;
            if (!a.pos.empty()) {
              const Value& src = a.pos[0];
              if (src.is(Kind::Object)) {
                o = src.object();
              } else if (src.is(Kind::Array)) {
                for (const auto& pair : src.array()) {
                  if (!pair.is(Kind::Array) || pair.array().size() != 2 || !pair.array()[0].is(Kind::String))
                    throw RuntimeError("namespace() expects a mapping or [key, value] pairs");
                  o.set(pair.array()[0].str(), pair.array()[1]);
                }
              } else {
                throw RuntimeError(std::string("namespace(): ") + src.type_name() + " is not iterable");
              }
            }
            for (const auto& [k, v] : a.kw) o.set(k, v);
            Value ns(std::move(o), Kind::Namespace);
            namespaces->push_back(ns);
            return ns;
          }));
  env.set("dict", method([](Args& a) {
            Object o;
            if (!a.pos.empty() && a.pos[0].is(Kind::Object)) o = a.pos[0].object();
            for (const auto& [k, v] : a.kw) o.set(k, v);
            return Value(std::move(o));
          }));
  env.set("strftime_now", method([](Args& a) {
            if (a.pos.empty() || !a.pos[0].is(Kind::String)) throw RuntimeError("strftime_now() needs a format string");
            std::time_t now = std::time(nullptr);
            std::tm tm{};
            localtime_r(&now, &tm);
            char buf[256];
            size_t n = std::strftime(buf, sizeof buf, a.pos[0].str().c_str(), &tm);
            return Value(std::string(buf, n));
          }));
}

}  // namespace nanovllm::jinja
