// Node's destructor: a deep tree (a long filter chain is a left spine of Filter nodes) is taken
// apart one node at a time, so destroying it needs no stack proportional to its depth.
#include "nanovllm/jinja/ast.h"

namespace nanovllm::jinja {

Node::~Node() {
  NodeList pending;
  auto take = [&pending](NodeList& children) {
    for (auto& c : children)
      if (c) pending.push_back(std::move(c));
    children.clear();
  };
  take(a);
  take(b);
  take(c);
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
    take(n->a);
    take(n->b);
    take(n->c);
  }  // n goes with no children left: its own destructor finds nothing to recurse into
}

}  // namespace nanovllm::jinja
