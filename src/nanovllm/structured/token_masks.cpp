// Per-state token classification at compile time and the run-time mask (token_masks.h).
#include "nanovllm/structured/token_masks.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace nanovllm::structured {

namespace {

size_t common_prefix(const std::string& x, const std::string& y) {
  size_t n = std::min(x.size(), y.size()), i = 0;
  while (i < n && x[i] == y[i]) ++i;
  return i;
}

}  // namespace

void PrefixWalker::reset(const Automaton& a, FramePool& pool, const Config& start, size_t max_len) {
  a_ = &a;
  pool_ = &pool;
  if (cfg_.size() < max_len + 1) {
    cfg_.resize(max_len + 1);
    sizes_.resize(max_len + 1);
  }
  cfg_[0] = start;
  valid_ = 0;
  sizes_[0] = pool.size();
}

size_t PrefixWalker::walk(const std::string& tok, size_t common) {
  size_t d = std::min(common, valid_);
  pool_->truncate(sizes_[d]);
  while (d < tok.size() && !cfg_[d].tops.empty()) {
    advance(*a_, *pool_, cfg_[d], uint8_t(tok[d]), cfg_[d + 1]);
    ++d;
    sizes_[d] = pool_->size();
  }
  valid_ = d;
  return d;
}

VocabIndex::VocabIndex(std::shared_ptr<const Vocabulary> v) : vocab(std::move(v)) {
  const auto& bytes = vocab->bytes;
  const int32_t V = vocab->size();
  is_stop.assign(size_t(V), 0);
  for (int32_t t : vocab->stop_ids)
    if (t >= 0 && t < V) is_stop[size_t(t)] = 1;
  for (int32_t t = 0; t < V; ++t)
    if (vocab->matchable[size_t(t)] && !bytes[size_t(t)].empty() && !is_stop[size_t(t)]) sorted.push_back(t);
  std::sort(sorted.begin(), sorted.end(), [&](int32_t x, int32_t y) { return bytes[size_t(x)] < bytes[size_t(y)]; });
  rank.assign(size_t(V), -1);
  lcp.assign(sorted.size(), 0);
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& s = bytes[size_t(sorted[i])];
    rank[size_t(sorted[i])] = int32_t(i);
    max_len = std::max(max_len, s.size());
    if (i) lcp[i] = int32_t(common_prefix(bytes[size_t(sorted[i - 1])], s));
  }
  size_t i = 0;
  for (int b = 0; b < 256; ++b) {
    first_begin[b] = int32_t(i);
    while (i < sorted.size() && uint8_t(bytes[size_t(sorted[i])][0]) == b) ++i;
  }
  first_begin[256] = int32_t(i);
}

namespace {

// The cache entries of states first, first + stride, ... (one thread's share). Past the deadline
// (checked every 256 tokens: one state's walk can take seconds) the thread raises `late` and
// stops; the others stop at their next check.
void build_some_masks(const Automaton& a, const VocabIndex& vocab, int32_t first, int32_t stride,
                      std::vector<StateMask>& masks, std::chrono::steady_clock::time_point deadline,
                      std::atomic<bool>& late) {
  const auto& bytes = vocab.vocab->bytes;
  const size_t V = bytes.size();
  FramePool pool;
  PrefixWalker walker;
  Config start;
  uint32_t steps = 0;
  auto past_deadline = [&] {
    if (late.load(std::memory_order_relaxed)) return true;
    if (std::chrono::steady_clock::now() <= deadline) return false;
    late = true;
    return true;
  };
  for (int32_t s = first; s < a.num_states(); s += stride) {
    if (!a.has_bytes[size_t(s)]) continue;
    if (past_deadline()) return;
    pool = FramePool();
    start.clear();
    close_frame(a, pool, {s, kOut}, start);
    walker.reset(a, pool, start, vocab.max_len);
    StateMask& m = masks[size_t(s)];
    for (int b = 0; b < 256; ++b) {
      bool viable = false;
      for (const Frame& f : start.tops) viable = viable || a.step(f.state, uint8_t(b)) >= 0;
      if (!viable) continue;
      const int32_t end = vocab.first_begin[b + 1];
      for (int32_t i = vocab.first_begin[b]; i < end;) {
        if (++steps % 256 == 0 && past_deadline()) {
          walker.finish();
          return;
        }
        const int32_t t = vocab.sorted[size_t(i)];
        const std::string& tok = bytes[size_t(t)];
        const size_t d = walker.walk(tok, i == vocab.first_begin[b] ? 0 : size_t(vocab.lcp[size_t(i)]));
        if (d < tok.size()) {  // dead: so is every following token sharing tok's first d + 1 bytes
          ++i;
          while (i < end && size_t(vocab.lcp[size_t(i)]) > d) ++i;
          continue;
        }
        const Config& c = walker.at(d);
        bool local = c.at_out, contextual = c.at_any_end;
        for (const Frame& f : c.tops) (pool.contextual(f) ? contextual : local) = true;
        if (local)
          m.accepted.push_back(t);
        else if (contextual)
          m.uncertain.push_back(t);
        ++i;
      }
    }
    walker.finish();
    if (m.accepted.size() * 32 > V) {
      m.accepted_bits.assign((V + 31) / 32, 0);
      for (int32_t t : m.accepted) m.accepted_bits[size_t(t) / 32] |= 1u << (t % 32);
      m.accepted = {};
    }
    m.accepted.shrink_to_fit();
    m.uncertain.shrink_to_fit();
  }
}

}  // namespace

std::vector<StateMask> build_state_masks(const Automaton& a, const VocabIndex& vocab, double max_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(std::max(0.0, max_seconds)));
  std::vector<StateMask> masks(size_t(a.num_states()));
  // States are independent: a few threads share them round-robin (neighbouring states cost alike).
  int32_t heavy = 0;
  for (int32_t s = 0; s < a.num_states(); ++s) heavy += a.has_bytes[size_t(s)];
  const int32_t threads = std::clamp<int32_t>(int32_t(std::thread::hardware_concurrency()), 1, 8);
  const int32_t n = std::min(threads, std::max(1, heavy / 8));
  std::atomic<bool> late{false};
  std::vector<std::thread> pool;
  for (int32_t t = 1; t < n; ++t)
    pool.emplace_back([&, t] { build_some_masks(a, vocab, t, n, masks, deadline, late); });
  build_some_masks(a, vocab, 0, n, masks, deadline, late);
  for (auto& th : pool) th.join();
  if (late)
    throw GrammarError("the grammar's token masks took more than " + std::to_string(max_seconds) + " s to build (" +
                       std::to_string(heavy) + " automaton states, each classifying the " +
                       std::to_string(vocab.sorted.size()) + " tokens it may start with): simplify it");
  return masks;
}

void fill_token_mask(const Automaton& a, const VocabIndex& vocab, const std::vector<StateMask>& masks, FramePool& pool,
                     PrefixWalker& walker, const Config& config, uint32_t* words) {
  const auto& bytes = vocab.vocab->bytes;
  const size_t W = vocab.vocab->mask_words();
  std::memset(words, 0, W * 4);
  std::vector<int32_t> states;
  for (const Frame& f : config.tops)
    if (std::find(states.begin(), states.end(), f.state) == states.end()) states.push_back(f.state);
  for (int32_t s : states) {
    const StateMask& m = masks[size_t(s)];
    if (!m.accepted_bits.empty())
      for (size_t w = 0; w < W; ++w) words[w] |= m.accepted_bits[w];
    for (int32_t t : m.accepted) words[size_t(t) / 32] |= 1u << (t % 32);
  }
  auto allowed = [&](int32_t t) { return (words[size_t(t) / 32] >> (t % 32)) & 1u; };
  std::vector<int32_t> candidates;
  for (int32_t s : states)
    for (int32_t t : masks[size_t(s)].uncertain)
      if (!allowed(t)) candidates.push_back(t);
  if (states.size() > 1) {
    std::sort(candidates.begin(), candidates.end(),
              [&](int32_t x, int32_t y) { return vocab.rank[size_t(x)] < vocab.rank[size_t(y)]; });
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  }
  if (!candidates.empty()) {
    walker.reset(a, pool, config, vocab.max_len);
    const std::string* prev = nullptr;
    for (int32_t t : candidates) {
      const std::string& tok = bytes[size_t(t)];
      size_t d = walker.walk(tok, prev ? common_prefix(*prev, tok) : 0);
      prev = &tok;
      if (d == tok.size() && (!walker.at(d).tops.empty() || walker.at(d).at_bottom))
        words[size_t(t) / 32] |= 1u << (t % 32);
    }
    walker.finish();
  }
  if (config.at_bottom)
    for (int32_t t : vocab.vocab->stop_ids) words[size_t(t) / 32] |= 1u << (t % 32);
}

bool accepts_bytes(const Automaton& a, FramePool& pool, const Config& config, const std::string& bytes, Config* out) {
  Config cur = config, nxt;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (cur.tops.empty()) return false;
    advance(a, pool, cur, uint8_t(bytes[i]), nxt);
    std::swap(cur, nxt);
  }
  if (cur.tops.empty() && !cur.at_bottom) return false;
  if (out) *out = std::move(cur);
  return true;
}

}  // namespace nanovllm::structured
