// Pushdown configurations: closure and one-byte steps (pda.h).
#include "nanovllm/structured/pda.h"

#include <algorithm>
#include <unordered_set>

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

namespace {

// Config::tops without duplicates: a linear search while tops is short, a hash set of the frames'
// keys past that (an object of many optional properties has one top per property that may come
// next, and a search per added top made each closure quadratic in them).
class TopIndex {
 public:
  explicit TopIndex(Config& out) : out_(out) {
    if (out_.tops.size() >= kFrom)
      for (const Frame& t : out_.tops) keys_.insert(key(t));
  }
  void add(const Frame& f) {
    if (out_.tops.size() < kFrom) {
      if (std::find(out_.tops.begin(), out_.tops.end(), f) != out_.tops.end()) return;
      out_.tops.push_back(f);
      if (out_.tops.size() == kFrom)
        for (const Frame& t : out_.tops) keys_.insert(key(t));
      return;
    }
    if (keys_.insert(key(f)).second) out_.tops.push_back(f);
  }

 private:
  static constexpr size_t kFrom = 16;
  static uint64_t key(const Frame& f) { return (uint64_t(uint32_t(f.state)) << 32) | uint32_t(f.parent); }
  Config& out_;
  std::unordered_set<uint64_t> keys_;
};

void close_into(const Automaton& a, FramePool& pool, Frame f, Config& out, TopIndex& tops) {
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
    if (a.has_bytes[s]) tops.add(x);
    for (int32_t i = a.call_begin[s]; i < a.call_begin[s + 1]; ++i) {
      const Automaton::Call& c = a.calls[size_t(i)];
      // A tail call (the caller's state after it can only finish) returns straight to the caller's
      // own return frame: what finishing the callee does is then what finishing the caller did. Not
      // over kOut / kAny, where finishing continues the finished rule's callers, so which rule
      // finished matters. Without it a chain of optional object properties (each rule's "skip me"
      // calls the next rule last) stacks one frame per property skipped.
      const bool tail = a.accepting[size_t(c.target)] && !a.has_bytes[size_t(c.target)] && !a.has_calls(c.target) &&
                        (x.parent >= 0 || x.parent == kBottom);
      push({a.rule_start[size_t(c.rule)], tail ? x.parent : pool.intern(c.target, x.parent)});
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

}  // namespace

void close_frame(const Automaton& a, FramePool& pool, Frame f, Config& out) {
  TopIndex tops(out);
  close_into(a, pool, f, out, tops);
}

void advance(const Automaton& a, FramePool& pool, const Config& in, uint8_t b, Config& out) {
  out.clear();
  TopIndex tops(out);
  for (const Frame& f : in.tops)
    if (int32_t t = a.step(f.state, b); t >= 0) close_into(a, pool, {t, f.parent}, out, tops);
}

Config initial_config(const Automaton& a, FramePool& pool) {
  Config c;
  close_frame(a, pool, {a.rule_start[size_t(a.root)], kBottom}, c);
  return c;
}

}  // namespace nanovllm::structured
