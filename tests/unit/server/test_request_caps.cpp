// Request caps (server/request_caps.h): each is a 400 naming the field and the setting, checked
// while the request is parsed; within the caps the request goes through.
#include <gtest/gtest.h>

#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/request_caps.h"

using namespace nanovllm;
using namespace nanovllm::server;

namespace {

ModelInfo small_caps_model() {
  ModelInfo m;
  m.name = "m";
  m.max_model_len = 1000;
  m.caps.max_stop_strings = 3;
  m.caps.max_stop_bytes = 10;
  m.caps.max_request_id_length = 8;
  m.caps.max_prompt_logprob_entries = 12;
  m.caps.vocab_size = 4;
  return m;
}

// The ApiError of parsing `extra` over a token-id completion ("" param and status 0 when accepted).
std::pair<int, std::string> refusal(const ojson& extra, std::string* message = nullptr) {
  ojson body = {{"prompt", {1, 2, 3, 4, 5, 6}}, {"max_tokens", 2}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  try {
    parse_completion_request(body, small_caps_model());
  } catch (const ApiError& e) {
    if (message) *message = e.what();
    return {e.status, e.param};
  }
  return {0, ""};
}

}  // namespace

TEST(RequestCaps, StopStringsAreCountedAndMeasured) {
  std::string msg;
  EXPECT_EQ(refusal({{"stop", {"a", "b", "c", "d"}}}, &msg), std::make_pair(400, std::string("stop")));
  EXPECT_NE(msg.find("4 stop strings"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-stop-strings"), std::string::npos) << msg;
  EXPECT_EQ(refusal({{"stop", {"abcdef", "ghijk"}}}, &msg), std::make_pair(400, std::string("stop")));
  EXPECT_NE(msg.find("11 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-stop-bytes"), std::string::npos) << msg;
  // Within both caps, the next check is reached (stop strings need a tokenizer, this model has none).
  EXPECT_EQ(refusal({{"stop", {"abc", "def", "ghij"}}}).second, "");
}

TEST(RequestCaps, LogitBiasIsAtMostTheVocabulary) {
  std::string msg;
  EXPECT_EQ(refusal({{"logit_bias", {{"0", 1}, {"1", 1}, {"2", 1}, {"3", 1}, {"5", 1}}}}, &msg),
            std::make_pair(400, std::string("logit_bias")));
  EXPECT_NE(msg.find("5 entries"), std::string::npos) << msg;
  EXPECT_EQ(refusal({{"logit_bias", {{"0", 1}, {"3", -1}}}}), std::make_pair(0, std::string()));
}

TEST(RequestCaps, PromptLogprobEntriesAreBounded) {
  std::string msg;
  // 6 prompt tokens x (1 + 1) = 12: at the cap; x (2 + 1) = 18: past it.
  EXPECT_EQ(refusal({{"prompt_logprobs", 1}}), std::make_pair(0, std::string()));
  EXPECT_EQ(refusal({{"prompt_logprobs", 2}}, &msg), std::make_pair(400, std::string("prompt_logprobs")));
  EXPECT_NE(msg.find("18 entries"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-prompt-logprob-entries"), std::string::npos) << msg;
}

TEST(RequestCaps, RequestIdAndTextBytes) {
  const ModelInfo m = small_caps_model();
  EXPECT_NO_THROW(check_request_id("12345678", m));
  try {
    check_request_id("123456789", m);
    FAIL() << "a 9-byte id passed a cap of 8";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "request_id");
    EXPECT_NE(std::string(e.what()).find("--max-request-id-length"), std::string::npos) << e.what();
  }
  EXPECT_EQ(max_text_bytes(m), kMaxBytesPerToken * 1000);
  EXPECT_NO_THROW(check_text_bytes(max_text_bytes(m), "prompt", m));
  try {
    check_text_bytes(max_text_bytes(m) + 1, "prompt", m);
    FAIL() << "text past the limit passed";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "prompt");
    EXPECT_NE(std::string(e.what()).find("max_model_len 1000"), std::string::npos) << e.what();
  }
}
