// Stop strings over one choice's streamed text, in one pass: the request's Aho-Corasick automaton
// (config/stop_strings.h, built once and shared by its choices) reads each new byte once, with
// this choice's state carried from delta to delta, so a token costs in proportion to its text,
// not to the number or size of the stop strings. Semantics (vLLM's, and this engine's before):
//   - the text is cut before the stop string that starts earliest (of those starting at the same
//     place, the first listed), after it with include_stop_str_in_output;
//   - while the end of the text could be the start of a stop string, those bytes are held back
//     (shown once known not to be one, or at the end);
//   - the stop string that matched is vLLM's stop_reason.
// Stop strings are valid UTF-8 (they come from JSON or Python strings) and the detokenizer gives
// whole characters, so a held-back suffix starts on a character boundary.
#pragma once
#include <string>
#include <string_view>

#include "nanovllm/config/sampling_params.h"

namespace nanovllm::output {

class StopFilter {
 public:
  StopFilter(Shared<StopStrings> stops, bool include_stop) : stops_(std::move(stops)), include_(include_stop) {}

  // What of the text so far may be shown after `delta` ("": nothing new, or all held back);
  // `final`: no text follows, release what was held. After a stop, pushes return "".
  std::string push(std::string_view delta, bool final);
  bool stopped() const { return stopped_; }
  // The stop string that ended the text; empty while none has.
  const std::string& matched() const { return matched_; }
  // Bytes held back now (a possible stop string at the end).
  size_t held() const { return pending_.size(); }

 private:
  Shared<StopStrings> stops_;
  bool include_;
  AhoCorasick::State state_ = AhoCorasick::kStart;
  std::string pending_;  // held back: the longest suffix that is a proper prefix of a stop string
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace nanovllm::output
