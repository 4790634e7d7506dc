// JSON string content pieces for the JSON Schema converter (json_schema_strings.h).
#include "nanovllm/structured/json_schema_strings.h"

#include <map>
#include <memory>

namespace nanovllm::structured::detail {

namespace {

// Decodes UTF-8 (the schema's names came from a JSON parser, so they are valid).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    uint8_t c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80)
    s += char(cp);
  else if (cp < 0x800)
    s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000)
    s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  else
    s += char(0xF0 | (cp >> 18)), s += char(0x80 | ((cp >> 12) & 0x3F)), s += char(0x80 | ((cp >> 6) & 0x3F)),
        s += char(0x80 | (cp & 0x3F));
  return s;
}

bool raw_allowed(uint32_t cp) { return cp >= 0x20 && cp != '"' && cp != '\\'; }

struct Trie {
  bool terminal = false;
  std::map<uint32_t, std::unique_ptr<Trie>> next;
};

// One character, raw or as a short escape, whose decoded value is not in `taken`.
int32_t char_not_in(Grammar& g, const Trie& t) {
  std::vector<CharRange> excluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  for (const auto& [cp, _] : t.next) excluded.push_back({cp, cp});
  std::vector<int32_t> alts = {g.char_class(excluded, true)};
  static const std::pair<char, uint32_t> kShort[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 8},
                                                     {'f', 12},  {'n', 10},    {'r', 13},  {'t', 9}};
  std::string escapes;
  for (const auto& [letter, cp] : kShort)
    if (!t.next.count(cp)) escapes += letter;
  if (!escapes.empty()) {
    std::vector<CharRange> r;
    for (char c : escapes) r.push_back({uint32_t(uint8_t(c)), uint32_t(uint8_t(c))});
    alts.push_back(g.seq({g.literal("\\"), g.char_class(r)}));
  }
  return g.choice(alts);
}

int32_t trie_expr(Grammar& g, const Trie& t) {
  std::vector<int32_t> alts;
  if (!t.terminal) alts.push_back(g.empty());
  alts.push_back(g.seq({char_not_in(g, t), g.star(json_char(g))}));
  for (const auto& [cp, child] : t.next) alts.push_back(g.seq({g.literal(utf8(cp)), trie_expr(g, *child)}));
  return g.choice(alts);
}

}  // namespace

int32_t json_char(Grammar& g) {
  int32_t r = g.rule_named("json_char");
  if (r >= 0) return g.ref(r);
  r = g.add_rule("json_char");
  auto hex = [&] { return g.char_class({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}); };
  auto cls = [&](std::vector<CharRange> v) { return g.char_class(std::move(v)); };
  int32_t non_surrogate = g.choice({g.seq({cls({{'0', '9'}, {'A', 'C'}, {'a', 'c'}}), hex(), hex(), hex()}),
                                    g.seq({cls({{'D', 'D'}, {'d', 'd'}}), cls({{'0', '7'}}), hex(), hex()}),
                                    g.seq({cls({{'E', 'F'}, {'e', 'f'}}), hex(), hex(), hex()})});
  int32_t pair = g.seq({cls({{'D', 'D'}, {'d', 'd'}}), cls({{'8', '9'}, {'A', 'B'}, {'a', 'b'}}), hex(), hex(),
                        g.literal("\\u"), cls({{'D', 'D'}, {'d', 'd'}}), cls({{'C', 'F'}, {'c', 'f'}}), hex(), hex()});
  int32_t escape = g.seq(
      {g.literal("\\"),
       g.choice(
           {cls({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
            g.seq({g.literal("u"), g.choice({non_surrogate, pair})})})});
  g.define(r, g.choice({g.char_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true), escape}));
  return g.ref(r);
}

int32_t key_excluding(Grammar& g, const std::vector<std::string>& names) {
  if (names.empty()) return g.star(json_char(g));
  Trie root;
  for (const std::string& n : names) {
    Trie* t = &root;
    bool representable = true;
    for (uint32_t cp : code_points(n)) {
      if (!raw_allowed(cp)) {
        representable = false;  // only escaped spellings exist: no raw-prefix key can equal it
        break;
      }
      auto& child = t->next[cp];
      if (!child) child = std::make_unique<Trie>();
      t = child.get();
    }
    if (representable) t->terminal = true;
  }
  return trie_expr(g, root);
}

std::string search_to_full_match(std::string_view p) {
  std::vector<std::string_view> alts;
  size_t start = 0;
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[')
      in_class = true;
    else if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if (c == '|' && depth == 0)
      alts.push_back(p.substr(start, i - start)), start = i + 1;
  }
  alts.push_back(p.substr(start));
  std::string out;
  for (size_t k = 0; k < alts.size(); ++k) {
    std::string_view a = alts[k];
    bool head = !a.empty() && a.front() == '^';
    if (head) a.remove_prefix(1);
    size_t slashes = 0;  // a trailing $ is an anchor unless escaped
    while (a.size() >= 2 + slashes && a[a.size() - 2 - slashes] == '\\') ++slashes;
    bool tail = !a.empty() && a.back() == '$' && slashes % 2 == 0;
    if (tail) a.remove_suffix(1);
    if (k) out += "|";
    if (!head) out += "[\\s\\S]*";
    if (!a.empty()) out += "(?:" + std::string(a) + ")";
    if (!tail) out += "[\\s\\S]*";
  }
  return alts.size() > 1 ? "(?:" + out + ")" : out;
}

}  // namespace nanovllm::structured::detail
