// The pushdown matcher's configurations over an Automaton (automaton.h): a set of stacks, each a
// top frame (a state of some rule) over a chain of return frames. Return frames are interned in a
// FramePool (same state over the same parent = same id), so equal stacks compare equal as
// (state, parent) pairs and a configuration stays a small, duplicate-free set.
//
// Sentinels end every chain: kBottom below the root rule (finishing there completes the text); in a
// token-mask cache walk, kOut below the walk's start frame and kAny below frames of unknown callers.
// Finishing the start frame's rule (reaching kOut) continues in every place the grammar calls that
// rule, each over kAny; finishing a rule over kAny does the same one level up. Frames over kAny are
// "contextual": the token they carry is allowed in some contexts, to be checked against the real
// stack at run time.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "nanovllm/structured/automaton.h"

namespace nanovllm::structured {

inline constexpr int32_t kBottom = -1;
inline constexpr int32_t kOut = -2;
inline constexpr int32_t kAny = -3;

struct Frame {
  int32_t state = 0;
  int32_t parent = kBottom;  // a FramePool id or a sentinel
  bool operator==(const Frame&) const = default;
};

class FramePool {
 public:
  int32_t intern(int32_t state, int32_t parent);
  const Frame& at(int32_t id) const { return nodes_[size_t(id)]; }
  // The frame's chain ends in kAny (it continues a caller the walk does not know).
  bool contextual(const Frame& f) const { return f.parent == kAny || (f.parent >= 0 && ctx_[size_t(f.parent)]); }
  size_t size() const { return nodes_.size(); }
  // Forgets the frames interned since size() was n (a speculative walk's scratch).
  void truncate(size_t n);

 private:
  static uint64_t key(int32_t state, int32_t parent) { return (uint64_t(uint32_t(state)) << 32) | uint32_t(parent); }
  std::vector<Frame> nodes_;
  std::vector<uint8_t> ctx_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct Config {
  std::vector<Frame> tops;  // frames whose state has byte transitions (what the next byte moves)
  bool at_bottom = false;   // the root rule can finish here: the text so far is complete
  bool at_out = false;      // the walk's start rule can finish here
  bool at_any_end = false;  // a contextual path finished the root rule here
  void clear() {
    tops.clear();
    at_bottom = at_out = at_any_end = false;
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
