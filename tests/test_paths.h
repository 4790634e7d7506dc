// Where tests find the source tree (fixtures, npm data): $NANOVLLM_SOURCE_DIR, set by ctest.
#pragma once
#include <cstdlib>
#include <string>

namespace nanovllm::test {

inline std::string source_dir() {
  const char* s = std::getenv("NANOVLLM_SOURCE_DIR");
  return s ? s : ".";
}
inline std::string fixture(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }

}  // namespace nanovllm::test
