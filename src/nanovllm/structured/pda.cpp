// Pushdown configurations: closure and one-byte steps (pda.h).
#include "nanovllm/structured/pda.h"

#include <algorithm>

namespace nanovllm::structured {

int32_t FramePool::intern(int32_t state, int32_t parent) {
  auto [it, inserted] = index_.try_emplace(key(state, parent), int32_t(nodes_.size()));
  if (inserted) {
    nodes_.push_back({state, parent});
    ctx_.push_back(parent == kAny || (parent >= 0 && ctx_[size_t(parent)]));
  }
  return it->second;
}

void FramePool::truncate(size_t n) {
  for (size_t i = n; i < nodes_.size(); ++i) index_.erase(key(nodes_[i].state, nodes_[i].parent));
  nodes_.resize(std::min(n, nodes_.size()));
  ctx_.resize(nodes_.size());
}

void close_frame(const Automaton& a, FramePool& pool, Frame f, Config& out) {
  // Termination: a call grows the stack, a return shrinks it, and build_automaton refused left
  // recursion (a call chain that consumes nothing); frames over kAny, which return to every caller,
  // are visited once each. Duplicate tops are dropped so ambiguous grammars stay small.
  Frame stack[64];
  std::vector<Frame> spill;
  std::vector<int32_t> seen_any;  // states visited over kAny
  int n = 0;
  auto push = [&](Frame x) {
    if (n < 64)
      stack[n++] = x;
    else
      spill.push_back(x);
  };
  auto continue_callers = [&](int32_t rule) {
    if (rule == a.root) out.at_any_end = true;
    for (int32_t t : a.return_states[size_t(rule)])
      if (std::find(seen_any.begin(), seen_any.end(), t) == seen_any.end()) {
        seen_any.push_back(t);
        push({t, kAny});
      }
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
      if (x.parent == kBottom) {
        out.at_bottom = true;
      } else if (x.parent == kOut) {
        out.at_out = true;
        continue_callers(a.rule_of[s]);
      } else if (x.parent == kAny) {
        continue_callers(a.rule_of[s]);
      } else {
        push(pool.at(x.parent));
      }
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
