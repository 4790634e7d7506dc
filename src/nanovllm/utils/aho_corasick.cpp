// Aho-Corasick construction: the trie from the patterns in sorted order (each pattern adds its
// nodes after the prefix it shares with the one before, children come in byte order), numbered
// breadth-first into the compact layout, then failure links breadth-first (a node's failure is
// always shallower, so it is done before the node's children need it).
#include "nanovllm/utils/aho_corasick.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace nanovllm {

namespace {

// The trie while it is built, in insertion (depth-first) order.
struct BuildNode {
  uint32_t first_child = 0, last_child = 0, next_sibling = 0;  // 0: none (the root is nobody's child)
  uint32_t depth = 0;
  int32_t pattern = -1;
  uint8_t label = 0;
};

std::vector<BuildNode> sorted_trie(const std::vector<std::string>& patterns) {
  std::vector<uint32_t> order(patterns.size());
  std::iota(order.begin(), order.end(), 0u);
  // By bytes (std::string compares as unsigned char), then by index: of equal patterns the first
  // listed comes first and names the node.
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const int c = patterns[a].compare(patterns[b]);
    return c != 0 ? c < 0 : a < b;
  });
  size_t bytes = 0;
  for (const std::string& p : patterns) bytes += p.size();
  std::vector<BuildNode> t(1);
  t.reserve(bytes + 1);           // at most one node per byte: no regrowth
  std::vector<uint32_t> path{0};  // the nodes of the previous pattern, root first
  const std::string* prev = nullptr;
  for (uint32_t idx : order) {
    const std::string& p = patterns[idx];
    size_t lcp = 0;
    if (prev)
      while (lcp < p.size() && lcp < prev->size() && p[lcp] == (*prev)[lcp]) ++lcp;
    path.resize(lcp + 1);
    for (size_t i = lcp; i < p.size(); ++i) {
      if (t.size() >= std::numeric_limits<uint32_t>::max() - 1)
        throw std::length_error("Aho-Corasick: the patterns are too large (over 4G trie nodes)");
      const uint32_t parent = path.back(), id = uint32_t(t.size());
      BuildNode n;
      n.depth = uint32_t(i + 1);
      n.label = uint8_t(p[i]);
      t.push_back(n);
      if (t[parent].first_child == 0)
        t[parent].first_child = id;
      else
        t[t[parent].last_child].next_sibling = id;
      t[parent].last_child = id;
      path.push_back(id);
    }
    if (t[path.back()].pattern < 0) t[path.back()].pattern = int32_t(idx);
    prev = &p;
  }
  return t;
}

}  // namespace

AhoCorasick::AhoCorasick(const std::vector<std::string>& patterns) : num_patterns_(patterns.size()) {
  if (patterns.size() > size_t(std::numeric_limits<int32_t>::max()))
    throw std::length_error("Aho-Corasick: too many patterns");
  for (size_t i = 0; i < patterns.size(); ++i)
    if (patterns[i].empty()) throw std::invalid_argument("Aho-Corasick: pattern " + std::to_string(i) + " is empty");
  const std::vector<BuildNode> t = sorted_trie(patterns);

  // Breadth-first numbering: node i's children get the next free ids as i is visited, so each
  // node's edges are contiguous and every node comes after all shallower ones.
  nodes_.resize(t.size() + 1);
  labels_.reserve(t.size() - 1);
  targets_.reserve(t.size() - 1);
  std::vector<uint32_t> old_of(t.size());  // new id -> build id
  old_of[0] = 0;
  uint32_t next_id = 1;
  for (uint32_t i = 0; i < t.size(); ++i) {
    const BuildNode& b = t[old_of[i]];
    nodes_[i].first_edge = uint32_t(labels_.size());
    nodes_[i].depth = b.depth;
    nodes_[i].pattern = b.pattern;
    for (uint32_t c = b.first_child; c != 0; c = t[c].next_sibling) {
      labels_.push_back(t[c].label);
      targets_.push_back(next_id);
      old_of[next_id++] = c;
    }
  }
  nodes_.back().first_edge = uint32_t(labels_.size());  // sentinel: the last node's edge end

  // Failure links and longest matches, parents before children.
  for (uint32_t i = 0; i + 1 < nodes_.size(); ++i) {
    for (uint32_t e = nodes_[i].first_edge; e < nodes_[i + 1].first_edge; ++e) {
      const State v = targets_[e];
      State f = 0;
      if (i != 0) {
        for (State s = nodes_[i].fail;; s = nodes_[s].fail) {
          if (const State c = child(s, labels_[e]); c != kNone) {
            f = c;
            break;
          }
          if (s == 0) break;
        }
      }
      nodes_[v].fail = f;
      nodes_[v].match_len = nodes_[v].pattern >= 0 ? nodes_[v].depth : nodes_[f].match_len;
    }
  }
  root_.fill(0);
  for (uint32_t e = nodes_[0].first_edge; e < nodes_[1].first_edge; ++e) root_[labels_[e]] = targets_[e];
}

AhoCorasick::State AhoCorasick::child(State s, unsigned char c) const {
  const uint8_t* b = labels_.data() + nodes_[s].first_edge;
  const uint8_t* e = labels_.data() + nodes_[s + 1].first_edge;
  const uint8_t* it = e - b <= 8 ? std::find(b, e, c) : std::lower_bound(b, e, c);
  return it != e && *it == c ? targets_[size_t(it - labels_.data())] : kNone;
}

AhoCorasick::State AhoCorasick::next(State s, unsigned char c) const {
  for (;; s = nodes_[s].fail) {
    if (s == 0) return root_[c];
    if (const State n = child(s, c); n != kNone) return n;
  }
}

int32_t AhoCorasick::first_listed_prefix(std::string_view text) const {
  int32_t best = -1;
  State s = 0;
  for (unsigned char c : text) {
    s = child(s, c);
    if (s == kNone) break;
    const int32_t p = nodes_[s].pattern;
    if (p >= 0 && (best < 0 || p < best)) best = p;
  }
  return best;
}

size_t AhoCorasick::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + labels_.capacity() + targets_.capacity() * sizeof(State) + sizeof(root_);
}

}  // namespace nanovllm
