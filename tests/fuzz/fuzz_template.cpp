// libFuzzer target for the chat-template parser and interpreter (src/nanovllm/jinja/, through
// ChatTemplate). Every input is a template source rendered with a small conversation: it must
// either render or throw TokenizerError (syntax errors, unknown filters, limits), never crash,
// hang or throw anything else. A few
// seeds come from real constructs (see -dict or the corpus directory you pass).
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DNANOVLLM_FUZZ=ON
//        cmake --build build-fuzz --target fuzz_template
// Run:   build-fuzz/tests/fuzz_template -max_len=2048 -max_total_time=180
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nanovllm/tokenizer/chat_template.h"
#include "nanovllm/utils/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  nanovllm::ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi {{ x }}"},)"
      R"({"role":"assistant","content":"Hello","reasoning_content":"think","tool_calls":[{"type":"function",)"
      R"("function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"42"}])");
  in.tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f","parameters":{}}}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  try {
    nanovllm::ChatTemplate t(source);
    (void)t.render(in);
  } catch (const nanovllm::TokenizerError&) {
    // A clear error is the expected outcome for most mutated templates.
  }
  return 0;
}
