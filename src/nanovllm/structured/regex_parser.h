// The regex front end's syntax tree (internal to regex.cpp and its tests): regex_parser.cpp reads
// a pattern into this tree, checking everything that depends only on the syntax (refused
// constructs, anchors in the wrong place, bounds, nesting); regex.cpp lowers it into the grammar
// IR. The tree keeps each node's byte offset in the pattern, so later errors can name it too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured::regex {

enum class NodeKind : uint8_t {
  Empty,   // matches the empty string (an empty group, an empty alternative, only anchors)
  Chars,   // a run of literal code points
  Class,   // one code point in `ranges` (normalized: negation and shorthands already applied)
  Seq,     // kids in order
  Alt,     // one of kids
  Repeat,  // kids[0] repeated min..max times (max = kUnbounded for *, +, {n,})
};

struct Node {
  NodeKind kind = NodeKind::Empty;
  size_t offset = 0;              // byte offset in the pattern where this construct starts
  std::vector<uint32_t> chars;    // Chars
  std::vector<CharRange> ranges;  // Class
  std::vector<Node> kids;         // Seq, Alt, Repeat
  int32_t min = 0, max = 0;       // Repeat
};

struct ParseLimits {
  int max_repeat = 1000;  // largest {n,m} bound
  int max_nesting = 200;  // deepest group nesting (keeps every recursive pass within the stack)
};

// Throws GrammarError "regex at offset N: ..." naming the construct.
Node parse(std::string_view pattern, const ParseLimits& limits);

}  // namespace nanovllm::structured::regex
