// The dynamic value of the Jinja interpreter. Kinds mirror @huggingface/jinja's runtime values
// (Undefined, None, Bool, Int, Float, String, Array, Object, Namespace, Function) because chat
// templates are checked byte for byte against it. Arrays, objects and namespaces are shared by
// reference, as in JavaScript (and Python): `ns.x = 1` must be seen by every holder of `ns`.
// Objects keep insertion order (dict literals and tojson print keys in the order written).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::jinja {

// A runtime failure without a position yet; the interpreter adds "at line:col" when it
// surfaces it as a TokenizerError.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value;
using Array = std::vector<Value>;

// Insertion-ordered string-keyed map. Chat-template objects are small; lookups are linear.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Call arguments: positional values, then keyword arguments in call order.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The most container elements the callee may create: what is left of the render's work budget
  // (the interpreter sets it), so that range(1000000) is refused before it allocates, not after.
  int64_t max_items = INT64_MAX;
  const Value* kwarg(const std::string& name) const;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

struct Env;
// Callables get the caller's scope: macros run in a child of it (dynamic scoping, as in HF).
using Function = std::function<Value(Args&, const std::shared_ptr<Env>&)>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Namespace, Function };

class Value {
 public:
  Value() = default;  // Undefined
  static Value none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
  }
  Value(bool b) : kind_(Kind::Bool), b_(b) {}
  Value(int64_t i) : kind_(Kind::Int), i_(i) {}
  Value(int i) : kind_(Kind::Int), i_(i) {}
  Value(double f) : kind_(Kind::Float), f_(f) {}
  Value(std::string s) : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a) : kind_(Kind::Array), arr_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o, Kind k = Kind::Object) : kind_(k), obj_(std::make_shared<Object>(std::move(o))) {}
  Value(Function f) : kind_(Kind::Function), fn_(std::make_shared<Function>(std::move(f))) {}
  // A template can nest containers as deep as its step budget allows ({% set x = [x] %} in a
  // loop). The last owner of a container frees what it holds with a work list, not recursion.
  ~Value();
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_mapping_like() const { return kind_ == Kind::Object || kind_ == Kind::Namespace; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::Int ? static_cast<double>(i_) : kind_ == Kind::Bool ? b_ : f_; }
  const std::string& str() const { return *s_; }
  Array& array() const { return *arr_; }
  Object& object() const { return *obj_; }
  const Function& function() const { return *fn_; }
  // Identity of the shared container (JavaScript reference equality).
  const void* identity() const;

  // Python/Jinja truthiness: empty strings, arrays and objects are false.
  bool truthy() const;
  // What `{{ v }}` prints (JavaScript toString of the runtime value).
  std::string to_output() const;
  // What JavaScript's `v.value.toString()` gives (used by `~` and string `+`).
  std::string to_js_string() const;
  // @huggingface/jinja's kind names, for error messages ("StringValue").
  const char* type_name() const;

 private:
  bool is_container() const { return kind_ == Kind::Array || kind_ == Kind::Object || kind_ == Kind::Namespace; }
  // If this is the container's last owner, moves its elements to `out` and empties it.
  void release_into(std::vector<Value>& out);
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<Function> fn_;
};

// JSON input -> Value. Integral numbers become Int (JSON.parse gives them no float identity).
Value from_json(const nlohmann::ordered_json& j, int depth = 0);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
  bool undefined_as_null = true;
};
// The tojson filter (Python json.dumps separators, as @huggingface/jinja prints them).
std::string to_json(const Value& v, const JsonOptions& opt, int depth = 0);

// `a == b` with JavaScript loose equality on the underlying values.
bool loose_equals(const Value& a, const Value& b);
// `a === b` on the underlying values (used by `in`, unique, the equalto test).
bool strict_equals(const Value& a, const Value& b);

// The most bytes one string operation (tojson, join, replace, ...) builds, whatever the render's
// limits: a list holding one list twice, nested 30 times, would otherwise print 2^30 leaves.
// The interpreter refuses results longer than its own max_output after that.
inline constexpr size_t kMaxBuiltString = 16u << 20;
// Throws RuntimeError naming `what` when `built` is longer than kMaxBuiltString.
inline void check_built(const std::string& built, const char* what) {
  if (built.size() > kMaxBuiltString)
    throw RuntimeError(std::string(what) + ": result longer than " + std::to_string(kMaxBuiltString) + " bytes");
}

// Nested containers deeper than this are refused (cycles through namespaces, hostile input).
constexpr int kMaxValueDepth = 256;

}  // namespace nanovllm::jinja
