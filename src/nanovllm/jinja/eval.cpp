// Expression evaluation. Operator semantics are @huggingface/jinja's (runtime.ts), which is the
// reference our chat-template tests compare against byte for byte; where it throws, we mostly
// throw too, with a position.
#include <cmath>

#include "nanovllm/jinja/interpreter.h"
#include "nanovllm/jinja/text.h"

namespace nanovllm::jinja {

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  DepthGuard g(*this, n);
  try {
    Value v = eval_node(n, env);
    switch (n.kind) {  // what makes a new value is charged for it (lookups are not)
      case NK::List:
      case NK::Tuple:
      case NK::Dict:
      case NK::Call:
      case NK::Binary:
      case NK::Filter: charge_created(v); break;
      default: break;
    }
    return v;
  } catch (const RuntimeError& e) {
    fail(n, e.what());
  }
}

Value Interpreter::eval_node(const Node& n, const EnvPtr& env) {
  switch (n.kind) {
    case NK::Literal: return n.literal;
    case NK::Ident: return env->lookup(n.text);
    case NK::List:
    case NK::Tuple: {
      Array items;
      for (const auto& e : n.a) items.push_back(eval(*e, env));
      return Value(std::move(items));
    }
    case NK::Dict: {
      Object o;
      for (size_t i = 0; i < n.a.size(); ++i) {
        Value k = eval(*n.a[i], env);
        if (!k.is(Kind::String)) fail(*n.a[i], std::string("dict keys must be strings, got ") + k.type_name());
        o.set(k.str(), eval(*n.b[i], env));
      }
      return Value(std::move(o));
    }
    case NK::Member: return eval_member(n, env);
    case NK::Call: return eval_call(n, env);
    case NK::Unary: return eval_unary(n, env);
    case NK::Binary: return eval_binary(n, env);
    case NK::Filter: {  // filters and tests read their whole input
      Value v = eval(*n.a[0], env);
      Args args = eval_args(n.b, env);
      spend(work_of(v));
      return apply_filter(n.text, v, args, n.flag);
    }
    case NK::Test: {
      Value v = eval(*n.a[0], env);
      Args args = eval_args(n.b, env);
      spend(work_of(v));
      return Value(apply_test(n.text, v, args) != n.flag);
    }
    case NK::Select: return eval(*n.a[1], env).truthy() ? eval(*n.a[0], env) : Value();
    case NK::Ternary: return eval(*n.a[0], env).truthy() ? eval(*n.a[1], env) : eval(*n.a[2], env);
    default: fail(n, "statement used as an expression");
  }
}

Value Interpreter::eval_unary(const Node& n, const EnvPtr& env) {
  Value v = eval(*n.a[0], env);
  if (n.text == "not") return Value(!v.truthy());
  double sign = n.text == "-" ? -1 : 1;
  if (v.is(Kind::Float)) return Value(sign * v.as_double());
  if (v.is(Kind::Int) || v.is(Kind::Bool)) {
    int64_t i = v.is(Kind::Bool) ? v.as_bool() : v.as_int();
    return Value(sign < 0 ? -i : i);
  }
  throw RuntimeError("unary '" + n.text + "' cannot be applied to " + v.type_name());
}

namespace {

Value number_result(double r, bool is_float) {
  if (!is_float && std::fabs(r) < 9.2e18) return Value(static_cast<int64_t>(r));
  return Value(r);
}

Value arithmetic(const std::string& op, const Value& l, const Value& r) {
  bool is_float = l.is(Kind::Float) || r.is(Kind::Float);
  if (!is_float) {  // exact 64-bit integer arithmetic while it fits
    int64_t a = l.as_int(), b = r.as_int(), res;
    if (op == "+" && !__builtin_add_overflow(a, b, &res)) return Value(res);
    if (op == "-" && !__builtin_sub_overflow(a, b, &res)) return Value(res);
    if (op == "*" && !__builtin_mul_overflow(a, b, &res)) return Value(res);
    if ((op == "//" || op == "%") && b == 0) throw RuntimeError("integer division or modulo by zero");
    if (op == "//" && !(a == INT64_MIN && b == -1)) return Value(a / b - ((a % b != 0) && ((a < 0) != (b < 0))));
    if (op == "%" && b != -1) return Value(a % b);  // JavaScript: the sign follows the dividend
  }
  double a = l.as_double(), b = r.as_double();
  if (op == "+") return number_result(a + b, is_float);
  if (op == "-") return number_result(a - b, is_float);
  if (op == "*") return number_result(a * b, is_float);
  if (op == "/") return Value(a / b);
  if (op == "//") return number_result(std::floor(a / b), is_float);
  if (op == "%") return number_result(std::fmod(a, b), is_float);
  if (op == "<") return Value(a < b);
  if (op == ">") return Value(a > b);
  if (op == "<=") return Value(a <= b);
  if (op == ">=") return Value(a >= b);
  throw RuntimeError("unknown operator '" + op + "' between numbers");
}

bool contains(const Value& container, const Value& item) {
  if (container.is(Kind::Array)) {
    for (const auto& e : container.array())
      if (strict_equals(e, item)) return true;
    return false;
  }
  if (container.is(Kind::String) && item.is(Kind::String)) return container.str().find(item.str()) != std::string::npos;
  if (container.is(Kind::Object) && item.is(Kind::String)) return container.object().find(item.str()) != nullptr;
  throw RuntimeError(std::string("'in' is not supported between ") + item.type_name() + " and " +
                     container.type_name());
}

}  // namespace

Value Interpreter::eval_binary(const Node& n, const EnvPtr& env) {
  const std::string& op = n.text;
  Value l = eval(*n.a[0], env);
  if (op == "and") return l.truthy() ? eval(*n.a[1], env) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.a[1], env);
  Value r = eval(*n.a[1], env);
  spend(work_of(l) + work_of(r));  // compared, searched or copied
  if (op == "==") return Value(loose_equals(l, r));
  if (op == "!=") return Value(!loose_equals(l, r));
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && (op == "in" || op == "not in")) return Value(op == "not in");
    throw RuntimeError("cannot apply '" + op + "' to an undefined value");
  }
  if (l.is_none() || r.is_none()) throw RuntimeError("cannot apply '" + op + "' to none");
  if (op == "~") return Value(l.to_js_string() + r.to_js_string());
  if (op == "in" || op == "not in") return Value(contains(r, l) == (op == "in"));
  bool l_num = l.is_number() || l.is(Kind::Bool), r_num = r.is_number() || r.is(Kind::Bool);
  if (op == "**" && l_num && r_num) {
    double a = l.as_double(), b = r.as_double();
    if (a == 0 && b < 0) throw RuntimeError("0.0 cannot be raised to a negative power");
    double res = std::pow(a, b);
    if (!std::isfinite(res)) throw RuntimeError("exponentiation result is not a finite real number");
    return number_result(res, l.is(Kind::Float) || r.is(Kind::Float) || b < 0);
  }
  if (l.is_number() && r.is_number()) return arithmetic(op, l, r);
  if (l.is(Kind::Array) && r.is(Kind::Array) && op == "+") {
    Array out = l.array();
    out.insert(out.end(), r.array().begin(), r.array().end());
    return Value(std::move(out));
  }
  if ((l.is(Kind::String) || r.is(Kind::String)) && op == "+") return Value(l.to_js_string() + r.to_js_string());
  if (l.is(Kind::String) && r.is(Kind::String) && (op == "<" || op == ">" || op == "<=" || op == ">=")) {
    int c = l.str().compare(r.str());
    return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  throw RuntimeError("unknown operator '" + op + "' between " + l.type_name() + " and " + r.type_name());
}

Value Interpreter::eval_member(const Node& n, const EnvPtr& env) {
  Value obj = eval(*n.a[0], env);
  if (obj.is(Kind::String)) spend(work_of(obj));  // indexing splits it, a method copies it
  const Node& prop = *n.a[1];
  if (prop.kind == NK::Slice) {
    Value v = eval_slice(obj, prop, env);
    charge_created(v);
    return v;
  }
  Value key = !n.flag ? (prop.kind == NK::Ident ? Value(prop.text) : prop.literal) : eval(prop, env);
  return get_attribute(obj, key);
}

Value Interpreter::eval_slice(const Value& obj, const Node& n, const EnvPtr& env) {
  if (!obj.is(Kind::Array) && !obj.is(Kind::String)) throw RuntimeError("only lists and strings can be sliced");
  int64_t bound[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; ++k) {
    if (!n.a[k]) continue;
    Value v = eval(*n.a[k], env);
    if (v.is_undefined()) continue;
    if (!v.is(Kind::Int)) throw RuntimeError("slice bounds must be integers");
    bound[k] = v.as_int();
    given[k] = true;
  }
  if (bound[2] == 0) throw RuntimeError("slice step cannot be zero");
  std::vector<std::string> chars;
  if (obj.is(Kind::String)) chars = split_code_points(obj.str());
  const int64_t len =
      obj.is(Kind::Array) ? static_cast<int64_t>(obj.array().size()) : static_cast<int64_t>(chars.size());
  int64_t step = bound[2], start, stop;
  // Python's slice rules (utils.ts `slice`).
  if (step > 0) {
    start = !given[0] ? 0 : bound[0] < 0 ? std::max<int64_t>(len + bound[0], 0) : std::min(bound[0], len);
    stop = !given[1] ? len : bound[1] < 0 ? std::max<int64_t>(len + bound[1], 0) : std::min(bound[1], len);
  } else {
    start = !given[0] ? len - 1 : bound[0] < 0 ? std::max<int64_t>(len + bound[0], -1) : std::min(bound[0], len - 1);
    stop = !given[1] ? -1 : bound[1] < -1 ? std::max<int64_t>(len + bound[1], -1) : std::min(bound[1], len - 1);
  }
  Array items;
  std::string text;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is(Kind::Array))
      items.push_back(obj.array()[static_cast<size_t>(i)]);
    else
      text += chars[static_cast<size_t>(i)];
  }
  return obj.is(Kind::Array) ? Value(std::move(items)) : Value(std::move(text));
}

Args Interpreter::eval_args(const NodeList& args, const EnvPtr& env) {
  Args out;
  for (const auto& a : args) {  // positional part first, as Python does
    if (a->kind == NK::Spread) {
      Value v = eval(*a->a[0], env);
      if (!v.is(Kind::Array)) fail(*a, std::string("cannot unpack ") + v.type_name() + " with *");
      for (const auto& e : v.array()) out.pos.push_back(e);
    } else if (a->kind != NK::Kwarg && a->kind != NK::KwSpread) {
      out.pos.push_back(eval(*a, env));
    }
  }
  auto add_kw = [&](const Node& at, const std::string& k, Value v) {
    if (out.kwarg(k)) fail(at, "got multiple values for keyword argument '" + k + "'");
    out.kw.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NK::Kwarg) {
      add_kw(*a, a->text, eval(*a->a[0], env));
    } else if (a->kind == NK::KwSpread) {
      Value v = eval(*a->a[0], env);
      if (!v.is(Kind::Object)) fail(*a, std::string("argument after ** must be a mapping, not ") + v.type_name());
      for (const auto& [k, e] : v.object().items) add_kw(*a, k, e);
    }
  }
  return out;
}

Value Interpreter::eval_call(const Node& n, const EnvPtr& env) {
  Args args = eval_args(n.b, env);
  Value fn = eval(*n.a[0], env);
  if (!fn.is(Kind::Function)) {
    std::string what = n.a[0]->kind == NK::Ident ? "'" + n.a[0]->text + "' (" + fn.type_name() + ")" : fn.type_name();
    throw RuntimeError("cannot call " + what + ": not a function");
  }
  step();
  args.max_items = (limits_.max_work - work_) / kElementWork;
  return fn.function()(args, env);
}

}  // namespace nanovllm::jinja
