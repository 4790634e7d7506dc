// Pushdown configurations: closure and one-byte steps (pda.h).
#include "nanovllm/structured/pda.h"

#include <algorithm>

namespace nanovllm::structured {

int32_t FramePool::intern(int32_t state, int32_t parent) {
  auto [it, inserted] = index_.try_emplace(key(state, parent), int32_t(nodes_.size()));
  if (inserted) nodes_.push_back({state, parent});
  return it->second;
}

void FramePool::truncate(size_t n) {
  for (size_t i = n; i < nodes_.size(); ++i) index_.erase(key(nodes_[i].state, nodes_[i].parent));
  nodes_.resize(std::min(n, nodes_.size()));
}

void close_frame(const Automaton& a, FramePool& pool, Frame f, Config& out) {
  // No visited set is needed for termination: a call grows the stack, a return shrinks it, and
  // build_automaton refused left recursion (a call chain that consumes nothing). Duplicate tops
  // are dropped so ambiguous grammars stay small.
  Frame stack[64];
  std::vector<Frame> spill;
  int n = 0;
  auto push = [&](Frame x) {
    if (n < 64) stack[n++] = x;
    else spill.push_back(x);
  };
  push(f);
  while (n > 0 || !spill.empty()) {
    Frame x;
    if (!spill.empty()) {
      x = spill.back();
      spill.pop_back();
    } else {
      x = stack[--n];
    }
    const size_t s = size_t(x.state);
    if (a.has_bytes[s] && std::find(out.tops.begin(), out.tops.end(), x) == out.tops.end()) out.tops.push_back(x);
    for (int32_t i = a.call_begin[s]; i < a.call_begin[s + 1]; ++i) {
      const Automaton::Call& c = a.calls[size_t(i)];
      push({a.rule_start[size_t(c.rule)], pool.intern(c.target, x.parent)});
    }
    if (a.accepting[s]) {
      if (x.parent == kBottom) out.at_bottom = true;
      else if (x.parent == kOut) out.at_out = true;
      else push(pool.at(x.parent));
    }
  }
}

void advance(const Automaton& a, FramePool& pool, const Config& in, uint8_t b, Config& out) {
  out.clear();
  for (const Frame& f : in.tops)
    if (int32_t t = a.step(f.state, b); t >= 0) close_frame(a, pool, {t, f.parent}, out);
}

Config initial_config(const Automaton& a, FramePool& pool) {
  Config c;
  close_frame(a, pool, {a.rule_start[size_t(a.root)], kBottom}, c);
  return c;
}

}  // namespace nanovllm::structured
