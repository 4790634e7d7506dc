// Aho-Corasick: one automaton over a set of byte strings (a request's stop strings) that reads a
// text once, byte by byte, and knows after each byte which patterns end there and how long a
// suffix of the text could still grow into one. Matching costs O(1) amortized per byte whatever
// the number or size of the patterns (matching each pattern on its own costs their total size per
// byte); building costs O(total size * log 256). Immutable once built: many readers (the n choices
// of a request) share one, each with its own State.
//
// Layout (compact, as a request may bring megabytes of patterns): nodes numbered breadth-first,
// their edges in one sorted array (CSR), the root's 256 transitions in a table.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class AhoCorasick {
 public:
  using State = uint32_t;  // a node: the longest suffix of the text read that is a prefix of a pattern
  static constexpr State kStart = 0;

  AhoCorasick() : AhoCorasick(std::vector<std::string>{}) {}
  // Empty patterns are refused (std::invalid_argument): they would match everywhere.
  explicit AhoCorasick(const std::vector<std::string>& patterns);

  // The state after reading byte `c` in state `s`.
  State next(State s, unsigned char c) const;
  // Length of the longest suffix of the text read that is a prefix of some pattern (the bytes a
  // streamed text must hold back while a pattern could still complete).
  uint32_t depth(State s) const { return nodes_[s].depth; }
  // Length of the longest pattern the text read ends with; 0: none ends here.
  uint32_t longest_match(State s) const { return nodes_[s].match_len; }
  // The index of the first listed pattern that `text` begins with; -1: none.
  int32_t first_listed_prefix(std::string_view text) const;

  size_t num_patterns() const { return num_patterns_; }
  size_t num_states() const { return nodes_.size(); }
  // Heap bytes of the automaton (for measurements).
  size_t memory_bytes() const;

 private:
  struct Node {
    uint32_t first_edge = 0;  // edges [first_edge, next node's first_edge) in labels_/targets_
    uint32_t fail = 0;        // the longest proper suffix of this node's string that is a node
    uint32_t depth = 0;       // length of this node's string
    uint32_t match_len = 0;   // longest pattern that is a suffix of this node's string
    int32_t pattern = -1;     // the first listed pattern equal to this node's string; -1: none
  };
  // The child of `s` by byte `c` in the trie (no failure links); kNone when there is none.
  static constexpr State kNone = ~State(0);
  State child(State s, unsigned char c) const;

  std::vector<Node> nodes_;      // breadth-first; one extra sentinel at the end (edge end)
  std::vector<uint8_t> labels_;  // edge bytes, sorted within a node
  std::vector<State> targets_;   // edge targets
  std::array<State, 256> root_{};
  size_t num_patterns_ = 0;
};

}  // namespace nanovllm
