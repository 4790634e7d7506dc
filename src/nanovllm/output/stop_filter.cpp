// StopFilter: the new bytes through the automaton, the earliest match among those ending in them,
// or else everything but the automaton's depth (the longest suffix that may grow into a match).
#include "nanovllm/output/stop_filter.h"

namespace nanovllm::output {

std::string StopFilter::push(std::string_view delta, bool final) {
  if (stopped_) return "";
  if (stops_.empty()) return std::string(delta);
  const AhoCorasick& ac = stops_->automaton();
  const size_t base = pending_.size();
  pending_ += delta;
  // No match ends in the held bytes (it would have stopped the text), so the earliest match of
  // all ends in the new ones: at each end, the longest pattern ending there starts first.
  size_t start = std::string::npos;
  for (size_t i = base; i < pending_.size(); ++i) {
    state_ = ac.next(state_, static_cast<unsigned char>(pending_[i]));
    if (const uint32_t len = ac.longest_match(state_); len > 0 && i + 1 - len < start) start = i + 1 - len;
  }
  std::string out;
  if (start != std::string::npos) {
    // Of the stop strings starting there (all within the text read), the first listed.
    matched_ = (*stops_)[size_t(ac.first_listed_prefix(std::string_view(pending_).substr(start)))];
    out = pending_.substr(0, start + (include_ ? matched_.size() : 0));
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // The automaton's depth never exceeds the held bytes plus the new ones (one per byte read).
  const size_t hold = final ? 0 : ac.depth(state_);
  out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

}  // namespace nanovllm::output
