// The stop-string filter as it was before the Aho-Corasick one (output/stop_filter.h): every stop
// string searched on its own in the held-back text at every delta. Kept as the oracle of the
// differential test (tests/unit/output/test_stop_filter.cpp) and the "before" of
// bench/stop_bench.cpp; never used by the engine.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "nanovllm/output/text_match.h"

namespace nanovllm::test {

class NaiveStopFilter {
 public:
  NaiveStopFilter(std::vector<std::string> stop, bool include) : stop_(std::move(stop)), include_(include) {}

  std::string push(const std::string& delta, bool final) {
    if (stopped_) return "";
    pending_ += delta;
    // The earliest stop string wins (the first listed of those starting there).
    size_t start = std::string::npos;
    const std::string* match = nullptr;
    for (auto& s : stop_) {
      const size_t at = pending_.find(s);
      if (at < start) start = at, match = &s;
    }
    std::string out;
    if (match) {
      out = pending_.substr(0, start + (include_ ? match->size() : 0));
      matched_ = *match;
      pending_.clear();
      stopped_ = true;
    } else {
      size_t hold = 0;
      if (!final)
        for (auto& s : stop_) hold = std::max(hold, output::partial_marker_suffix(pending_, s));
      out = pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
    }
    return out;
  }
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }
  size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stop_;
  bool include_;
  std::string pending_, matched_;
  bool stopped_ = false;
};

}  // namespace nanovllm::test
