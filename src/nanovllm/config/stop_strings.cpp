// StopStrings: the list checked, then its automaton built (utils/aho_corasick.h).
#include "nanovllm/config/stop_strings.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

const std::vector<std::string>& checked(const std::vector<std::string>& list) {
  for (const std::string& s : list)
    if (s.empty()) throw InvalidRequest("stop", "stop strings must not be empty");
  return list;
}

}  // namespace

StopStrings::StopStrings(std::vector<std::string> list) : list_(std::move(list)), automaton_(checked(list_)) {}

}  // namespace nanovllm
