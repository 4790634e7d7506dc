// Interpreter: statements (output, if, for, set, macro, call/filter blocks) and the scopes.
// Expressions are evaluated in eval.cpp.
#include "nanovllm/jinja/interpreter.h"

#include "nanovllm/jinja/lexer.h"
#include "nanovllm/jinja/text.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::jinja {

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get())
    for (const auto& [k, v] : e->vars)
      if (k == name) return v;
  return Value();
}

void Env::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

void Interpreter::fail(const Node& n, const std::string& what) const {
  throw TokenizerError("chat template error: " + what + " at " + line_col(src_, n.offset));
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw RuntimeError("template exceeded " + std::to_string(limits_.max_steps) + " loop iterations and calls");
  spend(kStepWork);
}

void Interpreter::spend(int64_t work) {
  work_ += work;
  if (work_ > limits_.max_work)
    throw RuntimeError("template exceeded its work limit (" + std::to_string(limits_.max_work) +
                       " units: steps, and bytes of strings and lists made or read); it loops or copies too much");
}

void Interpreter::charge_created(const Value& v) {
  if (v.is(Kind::String) && v.str().size() > limits_.max_output)
    throw RuntimeError("string longer than " + std::to_string(limits_.max_output) + " bytes");
  spend(work_of(v));
}

int64_t work_of(const Value& v) {
  auto direct = [](const Value& e) { return kElementWork + (e.is(Kind::String) ? int64_t(e.str().size()) : 0); };
  int64_t w = 0;
  if (v.is(Kind::String)) {
    w = int64_t(v.str().size());
  } else if (v.is(Kind::Array)) {
    for (const auto& e : v.array()) w += direct(e);
  } else if (v.is_mapping_like()) {
    for (const auto& [k, e] : v.object().items) w += int64_t(k.size()) + direct(e);
  }
  return w;
}

void Interpreter::emit(std::string& out, const std::string& s) {
  out += s;
  if (out.size() > limits_.max_output)
    throw RuntimeError("template output exceeds " + std::to_string(limits_.max_output) + " bytes");
}

std::string Interpreter::render(const NodeList& program, const EnvPtr& globals) {
  std::string out;
  depth_ = call_depth_ = 0;
  steps_ = work_ = 0;
  for (const auto& n : program) {
    if (exec(*n, globals, out) != Flow::Normal) fail(*n, "'break' or 'continue' outside of a loop");
  }
  return out;
}

Interpreter::Flow Interpreter::exec_block(const NodeList& body, const EnvPtr& env, std::string& out) {
  for (const auto& n : body) {
    Flow f = exec(*n, env, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Node& n, const EnvPtr& env, std::string& out) {
  DepthGuard g(*this, n);
  try {
    switch (n.kind) {
      case NK::Text: emit(out, n.text); return Flow::Normal;
      case NK::Comment: return Flow::Normal;
      case NK::Output: emit(out, eval(*n.a[0], env).to_output()); return Flow::Normal;
      case NK::If: return exec_block(eval(*n.a[0], env).truthy() ? n.b : n.c, env, out);
      case NK::For: exec_for(n, env, out); return Flow::Normal;
      case NK::Set: exec_set(n, env); return Flow::Normal;
      case NK::Macro: define_macro(n, env); return Flow::Normal;
      case NK::CallBlock: emit(out, exec_call_block(n, env).to_output()); return Flow::Normal;
      case NK::FilterBlock: {
        std::string body;
        if (exec_block(n.b, env, body) != Flow::Normal) fail(n, "'break' or 'continue' inside a filter block");
        Args args = eval_args(n.c, env);
        emit(out, apply_filter(n.text, Value(std::move(body)), args, !n.c.empty()).to_output());
        return Flow::Normal;
      }
      case NK::Break: return Flow::Break;
      case NK::Continue: return Flow::Continue;
      default: emit(out, eval(n, env).to_output()); return Flow::Normal;
    }
  } catch (const RuntimeError& e) {
    fail(n, e.what());
  }
}

namespace {
// Binds a loop/set target (a name or a tuple of names) to a value.
void assign_target(const Node& target, const Value& v, Env& scope) {
  if (target.kind == NK::Ident) {
    scope.set(target.text, v);
    return;
  }
  if (!v.is(Kind::Array)) throw RuntimeError(std::string("cannot unpack non-iterable ") + v.type_name());
  const Array& items = v.array();
  if (items.size() != target.a.size())
    throw RuntimeError(std::string("too ") + (target.a.size() > items.size() ? "few" : "many") + " items to unpack");
  for (size_t i = 0; i < items.size(); ++i) {
    if (target.a[i]->kind != NK::Ident) throw RuntimeError("can only unpack into names");
    scope.set(target.a[i]->text, items[i]);
  }
}
}  // namespace

void Interpreter::exec_for(const Node& n, const EnvPtr& env, std::string& out) {
  auto scope = std::make_shared<Env>(env);
  Value iterable = eval(*n.a[1], scope);
  spend(work_of(iterable));  // copied or split below
  Array items;
  if (iterable.is(Kind::Array)) {
    items = iterable.array();  // copy: the body may not see a list change under it
  } else if (iterable.is(Kind::Object)) {
    for (const auto& kv : iterable.object().items) items.emplace_back(kv.first);
  } else if (iterable.is(Kind::String)) {
    for (auto& ch : split_code_points(iterable.str())) items.emplace_back(std::move(ch));
  } else {
    fail(*n.a[1], std::string("cannot iterate over ") + iterable.type_name());
  }
  if (n.a.size() > 2) {  // inline filter: `for x in xs if cond`
    Array kept;
    for (auto& item : items) {
      step();
      auto probe = std::make_shared<Env>(scope);
      assign_target(*n.a[0], item, *probe);
      if (eval(*n.a[2], probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    step();
    Object loop;
    loop.items = {{"index", Value(i + 1)},
                  {"index0", Value(i)},
                  {"revindex", Value(len - i)},
                  {"revindex0", Value(len - i - 1)},
                  {"first", Value(i == 0)},
                  {"last", Value(i == len - 1)},
                  {"length", Value(len)},
                  {"previtem", i > 0 ? items[i - 1] : Value()},
                  {"nextitem", i < len - 1 ? items[i + 1] : Value()},
                  {"depth", Value(1)}};
    loop.items.emplace_back("cycle", Value(Function([i](Args& a, const EnvPtr&) {
                              if (a.pos.empty()) throw RuntimeError("loop.cycle() needs at least one argument");
                              return a.pos[static_cast<size_t>(i) % a.pos.size()];
                            })));
    scope->set("loop", Value(std::move(loop)));
    assign_target(*n.a[0], items[i], *scope);
    if (exec_block(n.b, scope, out) == Flow::Break) break;
  }
  if (len == 0) exec_block(n.c, scope, out);
}

void Interpreter::exec_set(const Node& n, const EnvPtr& env) {
  Value v;
  if (n.a.size() > 1) {
    v = eval(*n.a[1], env);
  } else {
    std::string body;
    if (exec_block(n.b, env, body) != Flow::Normal) fail(n, "'break' or 'continue' inside a set block");
    v = Value(std::move(body));
  }
  const Node& target = *n.a[0];
  if (target.kind == NK::Member) {
    Value obj = eval(*target.a[0], env);
    if (!obj.is(Kind::Namespace)) fail(target, "cannot assign an attribute of a non-namespace object");
    if (target.flag || target.a[1]->kind != NK::Ident) fail(target, "can only assign to ns.name");
    obj.object().set(target.a[1]->text, std::move(v));
  } else if (target.kind == NK::Ident || target.kind == NK::Tuple) {
    assign_target(target, v, *env);
  } else {
    fail(target, "invalid target of 'set'");
  }
}

void Interpreter::bind_params(const NodeList& params, Args& args, const EnvPtr& scope, const std::string& name) {
  std::vector<const Node*> pending;  // defaults, evaluated after every name is bound
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    const std::string& pname = p.text;
    const Value* v = i < args.pos.size() ? &args.pos[i] : nullptr;
    Value found;
    if (!v) {
      for (auto it = args.kw.begin(); it != args.kw.end(); ++it) {
        if (it->first == pname) {
          found = it->second;
          v = &found;
          args.kw.erase(it);
          break;
        }
      }
    }
    if (!v && p.kind == NK::Kwarg) pending.push_back(&p);
    scope->set(pname, v ? *v : Value());
  }
  // Jinja exposes extra arguments as `varargs` / `kwargs` inside the macro.
  Object extra_kw;
  for (auto& [k, v] : args.kw) extra_kw.items.emplace_back(k, v);
  scope->set("kwargs", Value(std::move(extra_kw)));
  Array extra_pos;
  for (size_t i = params.size(); i < args.pos.size(); ++i) extra_pos.push_back(args.pos[i]);
  scope->set("varargs", Value(std::move(extra_pos)));
  (void)name;
  for (const Node* p : pending) scope->set(p->text, eval(*p->a[0], scope));
}

void Interpreter::define_macro(const Node& n, const EnvPtr& env) {
  const Node* node = &n;  // the tree outlives every render, so the pointer stays valid
  env->set(n.text, Value(Function([this, node](Args& args, const EnvPtr& caller_env) {
             if (++call_depth_ > limits_.max_call_depth) {
               --call_depth_;
               throw RuntimeError("macro '" + node->text + "' recursed deeper than " +
                                  std::to_string(limits_.max_call_depth));
             }
             step();
             auto scope = std::make_shared<Env>(caller_env);
             std::string out;
             try {
               bind_params(node->a, args, scope, node->text);
               exec_block(node->b, scope, out);
             } catch (...) {
               --call_depth_;
               throw;
             }
             --call_depth_;
             return Value(std::move(out));
           })));
}

Value Interpreter::exec_call_block(const Node& n, const EnvPtr& env) {
  const Node* node = &n;
  Value caller(Function([this, node, env](Args& args, const EnvPtr&) {
    auto scope = std::make_shared<Env>(env);
    bind_params(node->c, args, scope, "caller");
    std::string out;
    exec_block(node->b, scope, out);
    return Value(std::move(out));
  }));
  const Node& call = *n.a[0];
  Args args = eval_args(call.b, env);
  Value fn = eval(*call.a[0], env);
  if (!fn.is(Kind::Function)) fail(call, std::string("cannot call ") + fn.type_name());
  auto call_env = std::make_shared<Env>(env);
  call_env->set("caller", caller);
  return fn.function()(args, call_env);
}

}  // namespace nanovllm::jinja
