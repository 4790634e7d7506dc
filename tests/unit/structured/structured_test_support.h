// Shared helpers of the structured-output tests: a JSON grammar written with the builder, small
// vocabularies, the Qwen3 vocabulary (when npm data is installed), and the brute-force mask (each
// token tried with accept_token) that the cached masks must equal.
#pragma once
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nanovllm/structured/automaton.h"
#include "nanovllm/structured/compiler.h"
#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/matcher.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace nanovllm::structured::test {

// Standard JSON (RFC 8259) with optional whitespace, built rule by rule as a converter would.
inline Grammar json_grammar() {
  Grammar g;
  int32_t value = g.add_rule("value"), object = g.add_rule("object"), array = g.add_rule("array");
  int32_t string = g.add_rule("string"), number = g.add_rule("number"), ws = g.add_rule("ws");
  int32_t root = g.add_rule("root");
  g.define(ws, g.star(g.char_class({{' ', ' '}, {'\n', '\n'}, {'\t', '\t'}})));
  int32_t hex = g.char_class({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  int32_t escape = g.seq(
      {g.literal("\\"),
       g.choice(
           {g.char_class(
                {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
            g.seq({g.literal("u"), g.repeat(hex, 4, 4)})})});
  int32_t plain = g.char_class({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true);
  g.define(string, g.seq({g.literal("\""), g.star(g.choice({plain, escape})), g.literal("\"")}));
  int32_t digits = g.plus(g.char_class({{'0', '9'}}));
  g.define(number,
           g.seq({g.optional(g.literal("-")),
                  g.choice({g.literal("0"), g.seq({g.char_class({{'1', '9'}}), g.star(g.char_class({{'0', '9'}}))})}),
                  g.optional(g.seq({g.literal("."), digits})),
                  g.optional(g.seq({g.char_class({{'e', 'e'}, {'E', 'E'}}),
                                    g.optional(g.char_class({{'+', '+'}, {'-', '-'}})), digits}))}));
  auto comma_list = [&](int32_t item) {
    return g.optional(g.seq({item, g.star(g.seq({g.ref(ws), g.literal(","), g.ref(ws), item}))}));
  };
  int32_t member = g.seq({g.ref(string), g.ref(ws), g.literal(":"), g.ref(ws), g.ref(value)});
  g.define(object, g.seq({g.literal("{"), g.ref(ws), comma_list(member), g.ref(ws), g.literal("}")}));
  g.define(array, g.seq({g.literal("["), g.ref(ws), comma_list(g.ref(value)), g.ref(ws), g.literal("]")}));
  g.define(value, g.choice({g.ref(object), g.ref(array), g.ref(string), g.ref(number), g.literal("true"),
                            g.literal("false"), g.literal("null")}));
  g.define(root, g.seq({g.ref(ws), g.ref(object), g.ref(ws)}));
  g.set_root(root);
  return g;
}

// root ::= item ("," item)* ; item ::= "a" | "a" "b"? | list ; list ::= "[" opt "]" ; opt ::= item?
// Two derivations of "a" (ambiguous), nullable rule calls, recursion through another rule.
inline Grammar nested_grammar() {
  Grammar g;
  int32_t root = g.add_rule("root"), item = g.add_rule("item"), list = g.add_rule("list"), opt = g.add_rule("opt");
  g.define(root, g.seq({g.ref(item), g.star(g.seq({g.literal(","), g.ref(item)}))}));
  g.define(item, g.choice({g.literal("a"), g.seq({g.literal("a"), g.optional(g.literal("b"))}), g.ref(list)}));
  g.define(list, g.seq({g.literal("["), g.ref(opt), g.literal("]")}));
  g.define(opt, g.optional(g.ref(item)));
  g.set_root(root);
  return g;
}

// One to three characters of [é日-本] then "!": multi-byte classes split across tokens.
inline Grammar utf8_grammar() {
  Grammar g;
  g.set_root(
      g.add_rule("root", g.seq({g.repeat(g.char_class({{0xE9, 0xE9}, {0x65E5, 0x672C}}), 1, 3), g.literal("!")})));
  return g;
}

// A vocabulary of the given token strings, padded with `padding` unmatchable ids, the last one a
// stop token.
inline std::shared_ptr<const Vocabulary> small_vocab(const std::vector<std::string>& tokens, int padding = 3) {
  auto v = std::make_shared<Vocabulary>();
  for (const std::string& t : tokens) {
    v->bytes.push_back(t);
    v->matchable.push_back(!t.empty());
  }
  for (int i = 0; i < padding; ++i) {
    v->bytes.push_back("");
    v->matchable.push_back(0);
  }
  v->stop_ids = {int32_t(v->bytes.size() - 1)};
  return v;
}

inline std::vector<uint32_t> mask_of(const GrammarMatcher& m) {
  std::vector<uint32_t> w(m.mask_words());
  m.fill_mask(w.data());
  return w;
}

// Every token tried with accept_token (then rolled back).
inline std::vector<uint32_t> brute_force_mask(GrammarMatcher& m, int32_t vocab_size) {
  std::vector<uint32_t> w(m.mask_words(), 0);
  for (int32_t t = 0; t < vocab_size; ++t)
    if (m.accept_token(t)) {
      w[size_t(t) / 32] |= 1u << (t % 32);
      m.rollback(1);
    }
  return w;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& w) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < w.size() * 32; ++i)
    if ((w[i / 32] >> (i % 32)) & 1u) ids.push_back(int32_t(i));
  return ids;
}

}  // namespace nanovllm::structured::test

namespace nanovllm::structured::test {

inline std::filesystem::path source_dir() { return nanovllm::test::source_dir(); }

// Qwen3's vocabulary padded to the model's 151,936 logits (EOS <|im_end|> and <|endoftext|>), or
// null without the npm data (scripts/setup.sh).
inline std::shared_ptr<const Vocabulary> qwen3_vocab() {
  static const std::shared_ptr<const Vocabulary> v = []() -> std::shared_ptr<const Vocabulary> {
    const std::filesystem::path dir = nanovllm::test::qwen3_tokenizer_dir();
    if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
    auto tok = Tokenizer::from_dir(dir.string());
    return std::make_shared<const Vocabulary>(
        vocabulary_from_tokenizer(*tok, 151936, {*tok->token_to_id("<|im_end|>"), *tok->token_to_id("<|endoftext|>")}));
  }();
  return v;
}

}  // namespace nanovllm::structured::test
