// Grammar -> per-rule DFAs with call edges, checked and trimmed (automaton.h).
#include "nanovllm/structured/automaton.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "nanovllm/structured/utf8_ranges.h"

namespace nanovllm::structured {

namespace {

enum class EdgeKind : uint8_t { Byte, Call, Eps };
struct NfaEdge {
  EdgeKind kind = EdgeKind::Eps;
  uint8_t lo = 0, hi = 0;
  int32_t rule = -1;
  int32_t to = 0;
};

// Which rules are inlined into their callers instead of called. A call is a place where a token can
// leave one rule's automaton for another's, which the token-mask cache can only resolve at run time
// (a grammar written rule by rule, char ::= ... and string ::= "\"" char* "\"", would make most
// tokens depend on the stack), while an inlined body is copied, and every copy of a state costs a
// walk over the vocabulary when the grammar is compiled. So a rule is inlined when it is not
// recursive and either used once (nothing is copied) or small and cheap to walk: no character class
// of more than 64 code points (free text such as a JSON string's characters stays one shared rule,
// whose states and cached masks serve every place that calls it). Inlining bounded-length wide
// rules too (a JSON string character) was measured: it doubled compile times for no gain in masks.
std::vector<uint8_t> inlined_rules(const Grammar& g) {
  const size_t R = g.num_rules();
  std::vector<std::vector<int32_t>> refs(R);  // rules referenced by each rule's body
  std::vector<int32_t> uses(R, 0);
  std::vector<int64_t> size(R, 0);  // rough NFA size of the body, callees counted as 1
  std::vector<uint8_t> wide(R, 0);  // the body has a class of more than 64 code points
  for (size_t r = 0; r < R; ++r) {
    std::vector<int32_t> stack{g.rule(int32_t(r)).body};
    while (!stack.empty()) {
      const Expr& e = g.expr(stack.back());
      stack.pop_back();
      size[r] += e.kind == ExprKind::Literal ? int64_t(e.literal.size()) : e.kind == ExprKind::CharClass ? 8 : 1;
      if (e.kind == ExprKind::CharClass) {
        uint64_t n = 0;
        for (const CharRange& c : e.ranges) n += c.hi - c.lo + 1;
        wide[r] |= n > 64;
      }
      if (e.kind == ExprKind::RuleRef) refs[r].push_back(e.rule), ++uses[size_t(e.rule)];
      for (int32_t i : e.items) stack.push_back(i);
    }
  }
  // Recursive rules reach themselves; a rule reaching a wide one is wide.
  std::vector<uint8_t> recursive(R, 0);
  for (size_t r = 0; r < R; ++r) {
    std::vector<uint8_t> seen(R, 0);
    std::vector<int32_t> stack(refs[r].begin(), refs[r].end());
    while (!stack.empty()) {
      int32_t x = stack.back();
      stack.pop_back();
      if (size_t(x) == r) recursive[r] = 1;
      if (seen[size_t(x)]) continue;
      seen[size_t(x)] = 1;
      wide[r] |= wide[size_t(x)];
      stack.insert(stack.end(), refs[size_t(x)].begin(), refs[size_t(x)].end());
    }
  }
  constexpr int64_t kSmall = 64;
  std::vector<uint8_t> out(R, 0);
  for (size_t r = 0; r < R; ++r)
    out[r] = int32_t(r) != g.root() && !recursive[r] && (uses[r] == 1 || (size[r] <= kSmall && !wide[r]));
  return out;
}

// One rule's Thompson NFA: state 0 starts, state 1 accepts; inlined rules' bodies are emitted in
// place of their calls.
class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, int32_t rule, const std::vector<uint8_t>& inlined, int64_t& budget)
      : g_(g), rule_(rule), inlined_(inlined), budget_(budget) {
    add();
    add();
    emit(g.rule(rule).body, 0, 1);
  }
  std::vector<std::vector<NfaEdge>> out;

 private:
  int32_t add() {
    if (--budget_ < 0)
      throw GrammarError("the grammar expands to too many automaton states (in rule '" + g_.rule(rule_).name +
                         "'): simplify it or lower its repetition counts");
    out.emplace_back();
    return int32_t(out.size() - 1);
  }
  void byte(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    out[size_t(from)].push_back({EdgeKind::Byte, lo, hi, -1, to});
  }
  void eps(int32_t from, int32_t to) { out[size_t(from)].push_back({EdgeKind::Eps, 0, 0, -1, to}); }

  void emit(int32_t id, int32_t from, int32_t to) {
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::Empty: eps(from, to); return;
      case ExprKind::Literal: {
        int32_t cur = from;
        for (size_t i = 0; i < e.literal.size(); ++i) {
          int32_t nxt = i + 1 == e.literal.size() ? to : add();
          byte(cur, uint8_t(e.literal[i]), uint8_t(e.literal[i]), nxt);
          cur = nxt;
        }
        return;
      }
      case ExprKind::CharClass:
        for (const ByteSequence& seq : utf8_sequences(e.ranges)) {
          int32_t cur = from;
          for (size_t i = 0; i < seq.size(); ++i) {
            int32_t nxt = i + 1 == seq.size() ? to : add();
            byte(cur, seq[i].lo, seq[i].hi, nxt);
            cur = nxt;
          }
        }
        return;
      case ExprKind::RuleRef:
        if (g_.rule(e.rule).body < 0)
          throw GrammarError("rule '" + g_.rule(e.rule).name + "' is used but never defined");
        if (inlined_[size_t(e.rule)])
          emit(g_.rule(e.rule).body, from, to);
        else
          out[size_t(from)].push_back({EdgeKind::Call, 0, 0, e.rule, to});
        return;
      case ExprKind::Sequence: {
        int32_t cur = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          int32_t nxt = i + 1 == e.items.size() ? to : add();
          emit(e.items[i], cur, nxt);
          cur = nxt;
        }
        return;
      }
      case ExprKind::Choice:
        for (int32_t item : e.items) emit(item, from, to);
        return;
      case ExprKind::Repeat: {
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) {
          int32_t nxt = add();
          emit(e.items[0], cur, nxt);
          cur = nxt;
        }
        if (e.max == kUnbounded) {
          int32_t loop = add();
          eps(cur, loop);
          int32_t back = add();  // a fresh end state, so a nullable item cannot short-circuit the loop
          emit(e.items[0], loop, back);
          eps(back, loop);
          eps(loop, to);
          return;
        }
        for (int32_t i = e.min; i < e.max; ++i) {
          eps(cur, to);
          int32_t nxt = add();
          emit(e.items[0], cur, nxt);
          cur = nxt;
        }
        eps(cur, to);
        return;
      }
    }
  }

  const Grammar& g_;
  int32_t rule_;
  const std::vector<uint8_t>& inlined_;
  int64_t& budget_;
};

struct ByteClasses {
  int32_t n = 0;
  uint8_t of[256] = {};
  std::vector<uint8_t> lo, hi;  // per class
};

ByteClasses byte_classes(const std::vector<std::vector<std::vector<NfaEdge>>>& nfas) {
  bool cut[257] = {};  // cut[b]: a class starts at byte b
  cut[0] = true;
  for (const auto& nfa : nfas)
    for (const auto& edges : nfa)
      for (const NfaEdge& e : edges)
        if (e.kind == EdgeKind::Byte) cut[e.lo] = cut[size_t(e.hi) + 1] = true;
  ByteClasses c;
  for (int b = 0; b < 256; ++b) {
    if (cut[b]) {
      c.lo.push_back(uint8_t(b));
      c.hi.push_back(uint8_t(b));
      ++c.n;
    }
    c.of[b] = uint8_t(c.n - 1);
    c.hi.back() = uint8_t(b);
  }
  return c;
}

// One rule's DFA (local state ids; 0 is the start).
struct RuleDfa {
  std::vector<std::vector<int32_t>> next;                       // [state][class]
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls;  // [state] -> (rule, target)
  std::vector<uint8_t> accepting;
};

// Subset construction. `work` counts what the construction touches (each NFA state a closure adds
// or an edge it follows, each interned set's size, each edge a DFA state's moves scan), so a
// grammar whose DFA states are few but huge (a `.*` before a long run of `.`) is refused as soon
// as one whose states are many: the build costs in proportion to what the limits allow.
RuleDfa determinize(const std::vector<std::vector<NfaEdge>>& nfa, const ByteClasses& bc, const std::string& rule,
                    int64_t& budget, int64_t& work) {
  auto charge = [&](int64_t units) {
    work -= units;
    if (work < 0)
      throw GrammarError("the grammar's automaton takes too much work to build (in rule '" + rule +
                         "'): an expression such as .*a.{100} makes every state track many positions; "
                         "simplify it");
  };
  std::vector<int32_t> stamp(nfa.size(), -1);  // stamp[s] == gen: s is in the closure being built
  int32_t gen = -1;
  auto closure = [&](std::vector<int32_t>& set) {  // in place: deduplicated, closed, sorted
    ++gen;
    size_t kept = 0;
    for (int32_t s : set)
      if (stamp[size_t(s)] != gen) stamp[size_t(s)] = gen, set[kept++] = s;
    set.resize(kept);
    for (size_t i = 0; i < set.size(); ++i) {
      const auto& edges = nfa[size_t(set[i])];
      charge(int64_t(edges.size()) + 1);
      for (const NfaEdge& e : edges)
        if (e.kind == EdgeKind::Eps && stamp[size_t(e.to)] != gen) {
          stamp[size_t(e.to)] = gen;
          set.push_back(e.to);
        }
    }
    std::sort(set.begin(), set.end());
  };
  RuleDfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  auto intern = [&](std::vector<int32_t> set) -> int32_t {
    if (set.empty()) return -1;
    charge(int64_t(set.size()));
    closure(set);
    charge(int64_t(set.size()));  // the map's comparisons
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    if (--budget < 0)
      throw GrammarError("the grammar's automaton grows past its state limit (in rule '" + rule +
                         "'): an expression such as (a|b)*a(a|b){20} explodes; simplify it");
    int32_t id = int32_t(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    return id;
  };
  intern({0});
  for (size_t d = 0; d < sets.size(); ++d) {
    charge(bc.n);
    std::vector<std::vector<int32_t>> by_class(size_t(bc.n));
    std::map<int32_t, std::vector<int32_t>> by_rule;
    bool acc = false;
    for (int32_t s : sets[d]) {
      if (s == 1) acc = true;
      for (const NfaEdge& e : nfa[size_t(s)]) {
        charge(1);
        if (e.kind == EdgeKind::Byte) {
          charge(int64_t(bc.of[e.hi]) - bc.of[e.lo]);
          for (int c = bc.of[e.lo]; c <= bc.of[e.hi]; ++c) by_class[size_t(c)].push_back(e.to);
        } else if (e.kind == EdgeKind::Call) {
          by_rule[e.rule].push_back(e.to);
        }
      }
    }
    std::vector<int32_t> next(size_t(bc.n), -1);
    for (int c = 0; c < bc.n; ++c) next[size_t(c)] = intern(std::move(by_class[size_t(c)]));
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (auto& [r, targets] : by_rule) calls.push_back({r, intern(std::move(targets))});
    dfa.next.push_back(std::move(next));
    dfa.calls.push_back(std::move(calls));
    dfa.accepting.push_back(acc);
  }
  return dfa;
}

// The non-consuming moves from a state: calls of nullable rules (to their targets). Visits every
// state reachable that way, `s` included.
template <class F>
void for_each_silent(const Automaton& a, const std::vector<uint8_t>& nullable, int32_t s, std::vector<int32_t>& stamp,
                     int32_t gen, F&& f) {
  std::vector<int32_t> stack{s};
  stamp[size_t(s)] = gen;
  while (!stack.empty()) {
    int32_t q = stack.back();
    stack.pop_back();
    f(q);
    for (int32_t i = a.call_begin[size_t(q)]; i < a.call_begin[size_t(q) + 1]; ++i) {
      const Automaton::Call& c = a.calls[size_t(i)];
      if (nullable[size_t(c.rule)] && stamp[size_t(c.target)] != gen) {
        stamp[size_t(c.target)] = gen;
        stack.push_back(c.target);
      }
    }
  }
}

// Rules that can finish: without consuming (nullable) or at all (productive), as fixpoints.
std::vector<uint8_t> finishing_rules(const Automaton& a, bool allow_bytes) {
  const size_t R = a.rule_start.size();
  std::vector<uint8_t> ok(R, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < R; ++r) {
      if (ok[r]) continue;
      std::vector<int32_t> stack{a.rule_start[r]};
      std::vector<uint8_t> seen(size_t(a.num_states()), 0);
      seen[size_t(a.rule_start[r])] = 1;
      while (!stack.empty() && !ok[r]) {
        int32_t q = stack.back();
        stack.pop_back();
        if (a.accepting[size_t(q)]) ok[r] = 1;
        auto visit = [&](int32_t t) {
          if (t >= 0 && !seen[size_t(t)]) seen[size_t(t)] = 1, stack.push_back(t);
        };
        for (int32_t i = a.call_begin[size_t(q)]; i < a.call_begin[size_t(q) + 1]; ++i)
          if (ok[size_t(a.calls[size_t(i)].rule)]) visit(a.calls[size_t(i)].target);
        if (allow_bytes)
          for (int32_t c = 0; c < a.num_classes; ++c) visit(a.next[size_t(q) * size_t(a.num_classes) + size_t(c)]);
      }
      changed |= ok[r] != 0;
    }
  }
  return ok;
}

void set_calls(Automaton& a, const std::vector<std::vector<Automaton::Call>>& per_state) {
  a.call_begin.assign(1, 0);
  a.calls.clear();
  for (const auto& cs : per_state) {
    a.calls.insert(a.calls.end(), cs.begin(), cs.end());
    a.call_begin.push_back(int32_t(a.calls.size()));
  }
}

// Drops calls of rules that never finish and edges into states that cannot reach acceptance.
void trim(Automaton& a, const std::vector<uint8_t>& productive) {
  const int32_t S = a.num_states();
  // live[s]: an accepting state of s's rule is reachable from s (bytes or productive calls).
  std::vector<std::vector<int32_t>> rev(static_cast<size_t>(S));
  for (int32_t s = 0; s < S; ++s) {
    for (int32_t c = 0; c < a.num_classes; ++c)
      if (int32_t t = a.next[size_t(s) * size_t(a.num_classes) + size_t(c)]; t >= 0) rev[size_t(t)].push_back(s);
    for (int32_t i = a.call_begin[size_t(s)]; i < a.call_begin[size_t(s) + 1]; ++i)
      if (productive[size_t(a.calls[size_t(i)].rule)]) rev[size_t(a.calls[size_t(i)].target)].push_back(s);
  }
  std::vector<uint8_t> live(size_t(S), 0);
  std::vector<int32_t> stack;
  for (int32_t s = 0; s < S; ++s)
    if (a.accepting[size_t(s)]) live[size_t(s)] = 1, stack.push_back(s);
  while (!stack.empty()) {
    int32_t t = stack.back();
    stack.pop_back();
    for (int32_t s : rev[size_t(t)])
      if (!live[size_t(s)]) live[size_t(s)] = 1, stack.push_back(s);
  }
  for (auto& t : a.next)
    if (t >= 0 && !live[size_t(t)]) t = -1;
  std::vector<std::vector<Automaton::Call>> calls(static_cast<size_t>(S));
  for (int32_t s = 0; s < S; ++s)
    for (int32_t i = a.call_begin[size_t(s)]; i < a.call_begin[size_t(s) + 1]; ++i) {
      const Automaton::Call& c = a.calls[size_t(i)];
      if (productive[size_t(c.rule)] && live[size_t(c.target)]) calls[size_t(s)].push_back(c);
    }
  set_calls(a, calls);
  for (int32_t s = 0; s < S; ++s) {
    a.has_bytes[size_t(s)] = 0;
    for (int32_t c = 0; c < a.num_classes; ++c)
      if (a.next[size_t(s) * size_t(a.num_classes) + size_t(c)] >= 0) a.has_bytes[size_t(s)] = 1;
  }
}

// A rule that reaches a call of itself without consuming a byte cannot be run by a pushdown
// matcher (its stack would grow forever): refused, naming the cycle's first rule.
void check_left_recursion(const Automaton& a, const std::vector<uint8_t>& nullable) {
  const size_t R = a.rule_start.size();
  std::vector<std::vector<int32_t>> edges(R);
  std::vector<int32_t> stamp(size_t(a.num_states()), -1);
  for (size_t r = 0; r < R; ++r)
    for_each_silent(a, nullable, a.rule_start[r], stamp, int32_t(r), [&](int32_t q) {
      for (int32_t i = a.call_begin[size_t(q)]; i < a.call_begin[size_t(q) + 1]; ++i)
        edges[r].push_back(a.calls[size_t(i)].rule);
    });
  std::vector<uint8_t> color(R, 0);  // 0 new, 1 on the path, 2 done
  for (size_t r0 = 0; r0 < R; ++r0) {
    if (color[r0]) continue;
    std::vector<std::pair<int32_t, size_t>> path{{int32_t(r0), 0}};
    color[r0] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == edges[size_t(r)].size()) {
        color[size_t(r)] = 2;
        path.pop_back();
        continue;
      }
      int32_t s = edges[size_t(r)][i++];
      if (color[size_t(s)] == 1)
        throw GrammarError("rule '" + a.rule_names[size_t(s)] +
                           "' is left-recursive (it can reach itself without consuming any text); rewrite it with "
                           "repetition, e.g. list ::= item (\",\" item)*");
      if (color[size_t(s)] == 0) {
        color[size_t(s)] = 1;
        path.push_back({s, 0});
      }
    }
  }
}

}  // namespace

size_t Automaton::bytes() const {
  return next.size() * 4 + call_begin.size() * 4 + calls.size() * sizeof(Call) + accepting.size() * 6 +
         rule_start.size() * 4 + calls.size() * 4;
}

Automaton build_automaton(const Grammar& g, const AutomatonLimits& limits) {
  g.check_complete();
  if (int64_t(g.num_rules()) > limits.max_rules)
    throw GrammarError("the grammar has " + std::to_string(g.num_rules()) + " rules, more than the limit of " +
                       std::to_string(limits.max_rules));
  int64_t budget = limits.max_states;
  std::vector<std::vector<std::vector<NfaEdge>>> nfas;
  // An inlined rule is never called: it gets an empty automaton (one state, no edges, no masks).
  const std::vector<uint8_t> inlined = inlined_rules(g);
  for (int32_t r = 0; r < int32_t(g.num_rules()); ++r)
    nfas.push_back(inlined[size_t(r)] ? std::vector<std::vector<NfaEdge>>(2) : NfaBuilder(g, r, inlined, budget).out);
  ByteClasses bc = byte_classes(nfas);
  Automaton a;
  a.num_classes = bc.n;
  std::copy(std::begin(bc.of), std::end(bc.of), std::begin(a.byte_class));
  a.root = g.root();
  budget = limits.max_states;
  int64_t work = limits.max_work;
  std::vector<RuleDfa> dfas;
  for (int32_t r = 0; r < int32_t(g.num_rules()); ++r) {
    a.rule_names.push_back(g.rule(r).name);
    a.rule_start.push_back(0);
    dfas.push_back(determinize(nfas[size_t(r)], bc, g.rule(r).name, budget, work));
    nfas[size_t(r)].clear();
  }
  int32_t base = 0;
  for (size_t r = 0; r < dfas.size(); ++r) a.rule_start[r] = base, base += int32_t(dfas[r].accepting.size());
  std::vector<std::vector<Automaton::Call>> calls;
  for (size_t r = 0; r < dfas.size(); ++r) {
    const int32_t off = a.rule_start[r];
    for (size_t s = 0; s < dfas[r].accepting.size(); ++s) {
      for (int32_t t : dfas[r].next[s]) a.next.push_back(t < 0 ? -1 : t + off);
      std::vector<Automaton::Call> cs;
      for (auto [callee, t] : dfas[r].calls[s]) cs.push_back({callee, t + off});
      calls.push_back(std::move(cs));
      a.accepting.push_back(dfas[r].accepting[s]);
      a.rule_of.push_back(int32_t(r));
    }
    dfas[r] = {};
  }
  set_calls(a, calls);
  a.has_bytes.assign(size_t(a.num_states()), 0);
  std::vector<uint8_t> productive = finishing_rules(a, true);
  if (!productive[size_t(a.root)])
    throw GrammarError("the grammar admits no complete text: rule '" + a.rule_names[size_t(a.root)] +
                       "' can never finish (infinite recursion or an empty choice)");
  trim(a, productive);
  std::vector<uint8_t> nullable = finishing_rules(a, false);
  check_left_recursion(a, nullable);
  a.return_states.assign(a.rule_start.size(), {});
  for (const Automaton::Call& c : a.calls) a.return_states[size_t(c.rule)].push_back(c.target);
  for (auto& r : a.return_states) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
  }
  return a;
}

}  // namespace nanovllm::structured
