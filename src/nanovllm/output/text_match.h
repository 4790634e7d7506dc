// Small text helpers shared by the output stages (stop strings, reasoning and tool-call tags):
// what may be shown of a streamed text while a marker could still be completing at its end.
#pragma once
#include <algorithm>
#include <string_view>

namespace nanovllm::output {

// Length of the longest proper prefix of `marker` that `text` ends with: those bytes must be held
// back, since the next delta may complete the marker.
inline size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k)
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

}  // namespace nanovllm::output
