// Syntax trees and runtime values far deeper than any stack: both are freed with a work list, so
// destroying them never overflows the stack (a million levels here; before, a few hundred
// thousand crashed with SIGSEGV).
#include <gtest/gtest.h>

#include "nanovllm/jinja/ast.h"
#include "nanovllm/jinja/value.h"

namespace nanovllm::jinja {
namespace {

constexpr int kDepth = 1'000'000;

TEST(JinjaDeepStructures, DeepSyntaxTreeIsFreedIteratively) {
  // x|f|f|...|f: a left spine of Filter nodes, as a long chain parses.
  NodePtr tree = std::make_unique<Node>(NK::Ident, 0);
  for (int i = 0; i < kDepth; ++i) {
    auto f = std::make_unique<Node>(NK::Filter, 0);
    f->a.push_back(std::move(tree));
    tree = std::move(f);
  }
  tree.reset();
  // Children in every list (a, b, c), not only a.
  NodeList body;
  for (int i = 0; i < kDepth; ++i) {
    auto n = std::make_unique<Node>(NK::If, 0);
    (i % 3 == 0 ? n->a : i % 3 == 1 ? n->b : n->c) = std::move(body);
    body.clear();
    body.push_back(std::move(n));
  }
  body.clear();
}

TEST(JinjaDeepStructures, DeeplyNestedValuesAreFreedIteratively) {
  Value list = Value(Array{});
  for (int i = 0; i < kDepth; ++i) list = Value(Array{list, Value(int64_t(i))});
  list = Value();
  Value obj = Value::none();
  for (int i = 0; i < kDepth; ++i) {
    Object o;
    o.set("next", obj);
    obj = Value(std::move(o), i % 2 ? Kind::Namespace : Kind::Object);
  }
  obj = Value();
  // A container still shared elsewhere is left alone, and stays intact.
  Value inner = Value(Array{Value("kept")});
  Value outer = Value(Array{inner});
  for (int i = 0; i < 1000; ++i) outer = Value(Array{outer});
  outer = Value();
  ASSERT_EQ(inner.array().size(), 1u);
  EXPECT_EQ(inner.array()[0].str(), "kept");
}

}  // namespace
}  // namespace nanovllm::jinja
