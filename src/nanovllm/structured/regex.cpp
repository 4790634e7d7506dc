// Regex -> grammar (regex.h): parses the pattern (regex_parser.cpp) and lowers the syntax tree into
// grammar expressions, one expression per construct (runs of literal code points become one
// literal; counted repeats stay Repeat nodes). While lowering it bounds the unrolled size of the
// result (RegexOptions::max_expansion), so nested counted repeats cannot explode downstream.
//
// With json_string_content every code point is emitted as JSON string content, in the form
// JSON.stringify writes: `"` and `\` escaped, U+0008 U+0009 U+000A U+000C U+000D as \b \t \n \f \r,
// the other controls below U+0020 as \u00xx (lower-case hex); a class becomes its safe part (a
// class without those code points) plus one escape literal per control or quote it admits.
#include "nanovllm/structured/regex.h"

#include <algorithm>
#include <cstdio>

#include "nanovllm/structured/regex_chars.h"
#include "nanovllm/structured/regex_parser.h"

namespace nanovllm::structured {
namespace {

using regex::Node;
using regex::NodeKind;

// JSON string content for one code point (UTF-8 when no escape is needed).
std::string json_content(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case 0x08: return "\\b";
    case 0x09: return "\\t";
    case 0x0A: return "\\n";
    case 0x0C: return "\\f";
    case 0x0D: return "\\r";
    default: break;
  }
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
    return buf;
  }
  std::string s;
  chars::append_utf8(s, c);
  return s;
}

bool needs_json_escape(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

struct Lowered {
  int32_t id = -1;
  int64_t units = 0;  // unrolled size, saturated just past the limit
};

class Lowering {
 public:
  Lowering(Grammar& g, const RegexOptions& opt) : g_(g), opt_(opt) {}

  Lowered lower(const Node& n) {
    switch (n.kind) {
      case NodeKind::Empty: return {g_.empty(), 0};
      case NodeKind::Chars: return lower_chars(n);
      case NodeKind::Class: return lower_class(n.ranges);
      case NodeKind::Seq:
      case NodeKind::Alt: {
        std::vector<int32_t> ids;
        int64_t units = 0;
        for (const Node& k : n.kids) {
          Lowered l = lower(k);
          ids.push_back(l.id);
          units = cap(units + l.units);
        }
        check(units, n.offset);
        return {n.kind == NodeKind::Seq ? g_.seq(std::move(ids)) : g_.choice(std::move(ids)), units};
      }
      case NodeKind::Repeat: {
        Lowered item = lower(n.kids[0]);
        const int64_t copies = n.max == kUnbounded ? std::max<int64_t>(n.min, 1) + 1 : n.max;
        const int64_t units = cap(item.units * copies);
        check(units, n.offset);
        return {g_.repeat(item.id, n.min, n.max), units};
      }
    }
    return {g_.empty(), 0};
  }

 private:
  int64_t cap(int64_t units) const { return std::min(units, opt_.max_expansion + 1); }

  void check(int64_t units, size_t offset) const {
    if (units > opt_.max_expansion)
      throw GrammarError("regex at offset " + std::to_string(offset) + ": the expression expands to more than " +
                         std::to_string(opt_.max_expansion) +
                         " grammar units once its counted repeats are unrolled (nested {m,n} bounds "
                         "multiply); the limit is RegexOptions::max_expansion");
  }

  Lowered lower_chars(const Node& n) {
    std::string bytes;
    for (uint32_t c : n.chars) {
      if (opt_.json_string_content)
        bytes += json_content(c);
      else
        chars::append_utf8(bytes, c);
    }
    const int64_t units = cap(int64_t(bytes.size()));
    check(units, n.offset);
    return {g_.literal(std::move(bytes)), units};
  }

  Lowered lower_class(const std::vector<CharRange>& ranges) {
    if (!opt_.json_string_content) return {g_.char_class(ranges), 1};
    std::vector<CharRange> safe;  // the ranges minus the code points JSON escapes
    std::vector<int32_t> parts;
    int64_t units = 1;
    for (const CharRange& r : ranges) {
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x5C); ++c)
        if (needs_json_escape(c)) {
          std::string esc = json_content(c);
          units += int64_t(esc.size());
          parts.push_back(g_.literal(std::move(esc)));
        }
      uint32_t lo = r.lo;
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x5C); ++c)
        if (needs_json_escape(c)) {
          if (c > lo) safe.push_back({lo, c - 1});
          lo = c + 1;
        }
      if (lo <= r.hi) safe.push_back({lo, r.hi});
    }
    if (!safe.empty() || parts.empty()) parts.insert(parts.begin(), g_.char_class(std::move(safe)));
    return {g_.choice(std::move(parts)), units};
  }

  Grammar& g_;
  const RegexOptions& opt_;
};

}  // namespace

int32_t add_regex(Grammar& g, std::string_view pattern, const RegexOptions& opt, const std::string& rule_base) {
  (void)rule_base;  // the lowering adds no helper rules
  if (opt.max_repeat < 0 || opt.max_expansion < 1) throw GrammarError("regex: RegexOptions limits must be positive");
  regex::ParseLimits limits;
  limits.max_repeat = opt.max_repeat;
  const Node tree = regex::parse(pattern, limits);
  return Lowering(g, opt).lower(tree).id;
}

Grammar regex_to_grammar(std::string_view pattern, const RegexOptions& opt) {
  Grammar g;
  const int32_t body = add_regex(g, pattern, opt);
  g.set_root(g.add_rule("root", body));
  return g;
}

}  // namespace nanovllm::structured
