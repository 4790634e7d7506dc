// The grammar builder: range normalization, rule bookkeeping and the EBNF printer.
#include <gtest/gtest.h>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {
namespace {

TEST(GrammarRanges, MergeSortAndNegate) {
  auto r = normalize_ranges({{'c', 'e'}, {'a', 'b'}, {'x', 'x'}}, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (CharRange{'a', 'e'}));
  EXPECT_EQ(r[1], (CharRange{'x', 'x'}));
  auto n = normalize_ranges({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true);
  ASSERT_EQ(n.size(), 4u);  // 20-21, 23-5B, 5D-D7FF, E000-10FFFF (surrogates out)
  EXPECT_EQ(n[0], (CharRange{0x20, 0x21}));
  EXPECT_EQ(n[1], (CharRange{0x23, 0x5B}));
  EXPECT_EQ(n[2], (CharRange{0x5D, 0xD7FF}));
  EXPECT_EQ(n[3], (CharRange{0xE000, kMaxCodePoint}));
  EXPECT_THROW(normalize_ranges({{'z', 'a'}}, false), GrammarError);
  EXPECT_THROW(normalize_ranges({{0, 0x110000}}, false), GrammarError);
}

TEST(GrammarBuilder, RulesAndErrors) {
  Grammar g;
  int32_t root = g.add_rule("root");
  EXPECT_THROW(g.add_rule("root"), GrammarError);
  EXPECT_EQ(g.fresh_name("root"), "root_1");
  int32_t item = g.add_rule("item");
  g.set_root(root);
  EXPECT_THROW(g.check_complete(), GrammarError);  // neither defined yet
  g.define(root, g.seq({g.literal("["), g.ref(item), g.star(g.seq({g.literal(", "), g.ref(item)})), g.literal("]")}));
  g.define(item, g.choice({g.literal("a\"b"), g.char_class({{'0', '9'}}, false), g.repeat(g.literal("x"), 2, 5)}));
  EXPECT_THROW(g.define(item, g.empty()), GrammarError);
  g.check_complete();
  EXPECT_EQ(g.to_ebnf(),
            "root ::= \"[\" item (\", \" item)* \"]\"\n"
            "item ::= \"a\\\"b\" | [0-9] | (\"x\"){2,5}\n");
  EXPECT_THROW(g.repeat(g.literal("x"), 3, 2), GrammarError);
  EXPECT_THROW(g.ref(99), GrammarError);
}

TEST(GrammarBuilder, PrintsEscapes) {
  Grammar g;
  g.set_root(g.add_rule("root", g.seq({g.literal("\n\t\\\x01\xC3\xA9\xF0\x9F\x98\x80"),
                                       g.char_class({{']', ']'}, {'-', '-'}, {0x4E00, 0x9FFF}}, true)})));
  EXPECT_EQ(g.to_ebnf(), "root ::= \"\\n\\t\\\\\\u0001\\u00E9\\U0001F600\" [^\\-\\]\\u4E00-\\u9FFF]\n");
}

}  // namespace
}  // namespace nanovllm::structured
