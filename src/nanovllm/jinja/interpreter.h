// Tree-walking interpreter for parsed templates. Scoping follows @huggingface/jinja: a for loop
// opens one scope for all its iterations, `set` writes to the current scope, `if` opens none, and
// a macro body runs in a scope whose parent is the CALLER's scope.
//
// Resource bounds (a template is user input to a server): evaluation depth, macro call depth,
// total loop iterations + calls, range() length and output size are all capped; going past a cap
// is a TokenizerError, never a crash. Loops that print nothing are bounded too: every step, every
// value an expression creates and every string or list an operation reads is charged to a work
// budget (see Limits::max_work), so a short template cannot spend seconds copying or scanning.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nanovllm/jinja/ast.h"
#include "nanovllm/jinja/value.h"

namespace nanovllm::jinja {

struct Env {
  std::shared_ptr<Env> parent;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Env(std::shared_ptr<Env> p = nullptr) : parent(std::move(p)) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};
using EnvPtr = std::shared_ptr<Env>;

struct Limits {
  int max_depth = 600;            // nested evaluation frames (expressions, blocks, calls)
  int max_call_depth = 64;        // nested macro calls
  int64_t max_steps = 1'000'000;  // loop iterations + calls, over the whole render
  size_t max_output = 64u << 20;  // bytes of output, also the cap on any one string
  // Work units over the whole render, about one per byte of memory an operation touches: each
  // step costs kStepWork, each created or read string its bytes, each container element its size.
  int64_t max_work = int64_t(1) << 32;
};

// The work a loop iteration or call is charged (about what it allocates: a scope, the loop object).
inline constexpr int64_t kStepWork = 256;
// The work of one container element: its bytes (copying a list copies them).
inline constexpr int64_t kElementWork = int64_t(sizeof(Value));
// Work of touching `v`: a string's bytes; a container's elements, plus the bytes of the strings
// (and keys) it holds directly. Nested containers are not walked (the walk would cost what it
// measures: they were charged when they were made).
int64_t work_of(const Value& v);

// Globals every template sees: true/false/none (and title-case), range, namespace, dict,
// raise_exception, strftime_now. Every namespace() created is appended to `namespaces`, so that
// the caller can empty them after the render (a namespace may hold itself: `ns.me = ns`).
void install_globals(Env& env, std::shared_ptr<std::vector<Value>> namespaces);

// Filters and tests (filters.cpp). `has_call` tells `x|f` from `x|f()`, which
// @huggingface/jinja treats differently for a few filters.
Value apply_filter(const std::string& name, const Value& v, const Args& args, bool has_call);
bool apply_test(const std::string& name, const Value& v, const Args& args);
// Attribute or method of a value: `s.upper`, `d.items`, `xs.length`, `d.key` (builtins.cpp).
Value get_attribute(const Value& obj, const Value& key);

class Interpreter {
 public:
  Interpreter(std::string_view source, Limits limits = {}) : src_(source), limits_(limits) {}
  std::string render(const NodeList& program, const EnvPtr& globals);

 private:
  enum class Flow { Normal, Break, Continue };
  // Counts nested exec/eval frames; past limits_.max_depth the render fails cleanly.
  struct DepthGuard {
    Interpreter& in;
    DepthGuard(Interpreter& i, const Node& n) : in(i) {
      if (++in.depth_ > in.limits_.max_depth) in.fail(n, "template recursion too deep");
    }
    ~DepthGuard() { --in.depth_; }
  };

  Flow exec_block(const NodeList& body, const EnvPtr& env, std::string& out);
  Flow exec(const Node& n, const EnvPtr& env, std::string& out);
  void exec_for(const Node& n, const EnvPtr& env, std::string& out);
  void exec_set(const Node& n, const EnvPtr& env);
  void define_macro(const Node& n, const EnvPtr& env);
  Value exec_call_block(const Node& n, const EnvPtr& env);
  void emit(std::string& out, const std::string& s);
  void step();
  void spend(int64_t work);
  // A value an expression made: charged, and a string longer than max_output is refused.
  void charge_created(const Value& v);

  Value eval(const Node& n, const EnvPtr& env);
  Value eval_node(const Node& n, const EnvPtr& env);
  Value eval_binary(const Node& n, const EnvPtr& env);
  Value eval_unary(const Node& n, const EnvPtr& env);
  Value eval_member(const Node& n, const EnvPtr& env);
  Value eval_slice(const Value& obj, const Node& n, const EnvPtr& env);
  Value eval_call(const Node& n, const EnvPtr& env);
  Args eval_args(const NodeList& args, const EnvPtr& env);
  void bind_params(const NodeList& params, Args& args, const EnvPtr& scope, const std::string& name);

  [[noreturn]] void fail(const Node& n, const std::string& what) const;

  std::string_view src_;
  Limits limits_;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  int64_t work_ = 0;
};

}  // namespace nanovllm::jinja
