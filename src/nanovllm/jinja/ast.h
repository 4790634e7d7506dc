// Syntax tree of a parsed template. One generic node type keeps the parser and interpreter short;
// the layout of each kind (which child list holds what) is documented next to the kind.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/jinja/value.h"

namespace nanovllm::jinja {

enum class NK : uint8_t {
  // Statements
  Text,         // text = the literal text
  Comment,      // nothing
  Output,       // a[0] = expression printed by {{ }}
  If,           // a[0] = test; b = body; c = else body (an elif is a nested If in c)
  For,          // a[0] = target (Ident/Tuple), a[1] = iterable, a[2] = inline `if` filter (optional);
                // b = body; c = else body
  Set,          // a[0] = target (Ident/Tuple/Member); a[1] = value, or none and b = block body
  Macro,        // text = name; a = parameters (Ident or Kwarg with default); b = body
  CallBlock,    // a[0] = Call expression; c = caller parameters; b = body
  FilterBlock,  // text = filter name; c = filter arguments; b = body
  Break,
  Continue,
  // Expressions
  Literal,   // literal = value
  Ident,     // text = name
  List,      // a = items
  Tuple,     // a = items
  Dict,      // a = keys, b = values
  Member,    // a[0] = object, a[1] = property (Literal/Ident/Slice or any expression); flag = computed
  Slice,     // a[0..2] = start, stop, step (null when omitted)
  Call,      // a[0] = callee; b = arguments (expressions, Kwarg, Spread, KwSpread)
  Kwarg,     // text = name; a[0] = value
  Spread,    // a[0] = expression (*args)
  KwSpread,  // a[0] = expression (**kwargs)
  Unary,     // text = operator ("not", "-", "+"); a[0] = operand
  Binary,    // text = operator; a[0], a[1]
  Filter,    // a[0] = operand; text = filter name; b = arguments
  Test,      // a[0] = operand; text = test name; flag = negated; b = arguments
  Select,    // a[0] = value, a[1] = condition  (`x if cond` without else)
  Ternary,   // a[0] = condition, a[1] = if true, a[2] = if false
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NK kind;
  uint32_t offset;  // byte offset in the template source, for line:col in errors
  std::string text;
  Value literal;
  bool flag = false;
  NodeList a, b, c;

  Node(NK k, uint32_t off) : kind(k), offset(off) {}
  // Frees the subtree with a work list instead of recursion, so that no tree is too deep to
  // destroy (the parser bounds the depth too, but a bound on the stack must not rest on that).
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
};

}  // namespace nanovllm::jinja
