// The pushdown matcher's configurations over an Automaton (automaton.h): a set of stacks, each a
// top frame (a state of some rule) over a chain of return frames. Return frames are interned in a
// FramePool (same state over the same parent = same id), so equal stacks compare equal as
// (state, parent) pairs and a configuration stays a small, duplicate-free set.
//
// Two sentinels end every chain: kBottom below the root rule (finishing there completes the text)
// and kOut below a token-mask cache walk's start frame (finishing there leaves the rule, and what
// follows depends on callers the walk does not know).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "nanovllm/structured/automaton.h"

namespace nanovllm::structured {

inline constexpr int32_t kBottom = -1;
inline constexpr int32_t kOut = -2;

struct Frame {
  int32_t state = 0;
  int32_t parent = kBottom;  // a FramePool id, kBottom or kOut
  bool operator==(const Frame&) const = default;
};

class FramePool {
 public:
  int32_t intern(int32_t state, int32_t parent);
  const Frame& at(int32_t id) const { return nodes_[size_t(id)]; }
  size_t size() const { return nodes_.size(); }
  // Forgets the frames interned since size() was n (a speculative walk's scratch).
  void truncate(size_t n);

 private:
  static uint64_t key(int32_t state, int32_t parent) { return (uint64_t(uint32_t(state)) << 32) | uint32_t(parent); }
  std::vector<Frame> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct Config {
  std::vector<Frame> tops;  // frames whose state has byte transitions (what the next byte moves)
  bool at_bottom = false;   // the root rule can finish here: the text so far is complete
  bool at_out = false;      // the walk's start rule can finish here
  void clear() {
    tops.clear();
    at_bottom = at_out = false;
  }
};

// Adds `f` to `out` with everything it reaches without consuming a byte: calls entered (a return
// frame interned for each), finished rules returned from.
void close_frame(const Automaton& a, FramePool& pool, Frame f, Config& out);
// out = the configuration after byte b (out is cleared first; it must not alias in).
void advance(const Automaton& a, FramePool& pool, const Config& in, uint8_t b, Config& out);
// The configuration at the start of the root rule.
Config initial_config(const Automaton& a, FramePool& pool);

}  // namespace nanovllm::structured
