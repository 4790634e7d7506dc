// A request's stop strings, with the Aho-Corasick automaton that finds them all in one pass over
// the generated text (output/stop_filter.h). The automaton is built once, when the list is set:
// the server sets it while it parses the request, on an I/O thread, never on the engine thread;
// SamplingParams holds it as Shared<StopStrings>, so the request's n choices, the engine's
// sequences and the server's records all read one list and one automaton.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "nanovllm/utils/aho_corasick.h"

namespace nanovllm {

class StopStrings {
 public:
  using value_type = std::string;

  StopStrings() = default;
  // Implicit, as the std::vector<std::string> it was. Throws InvalidRequest("stop") on an empty
  // string (it would match everywhere).
  StopStrings(std::vector<std::string> list);  // NOLINT
  StopStrings(std::initializer_list<std::string> l) : StopStrings(std::vector<std::string>(l)) {}

  const std::vector<std::string>& list() const { return list_; }
  const AhoCorasick& automaton() const { return automaton_; }
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }
  size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  const std::string& operator[](size_t i) const { return list_[i]; }

 private:
  std::vector<std::string> list_;
  AhoCorasick automaton_;
};

}  // namespace nanovllm
