// The pooling endpoints' protocol (pooling_protocol.h) over the tiny Qwen3 model run as a pooling
// model (CPU): /v1/embeddings bodies (token ids, text, truncation, encoding_format, dimensions) and
// vLLM's errors, base64 equal to the floats, /score and /rerank pairing, ordering and top_n, and the
// responses built from the engine's real outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "nanovllm/server/pooling_protocol.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using namespace nanovllm::server;

namespace {

LLM& pooling_llm() {
  static LLM llm = [] {
    EngineConfig cfg = test::tiny_cfg();
    cfg.runner = RunnerChoice::Pooling;
    cfg.block_size = 16;
    return LLM(cfg, test::qwen3_tokenizer_dir());
  }();
  return llm;
}

ModelInfo info(const LLM& llm) {
  ModelInfo m;
  m.llm = &llm;
  m.name = "tiny";
  m.max_model_len = 64;
  return m;
}

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> uint32_t {
    if (c >= 'A' && c <= 'Z') return uint32_t(c - 'A');
    if (c >= 'a' && c <= 'z') return uint32_t(c - 'a' + 26);
    if (c >= '0' && c <= '9') return uint32_t(c - '0' + 52);
    return c == '+' ? 62u : 63u;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    uint32_t w = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      w <<= 6;
      if (s[i + size_t(k)] == '=')
        ++pad;
      else
        w |= val(s[i + size_t(k)]);
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += char((w >> (16 - 8 * k)) & 0xff);
  }
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);  // little-endian host, as the wire
  return v;
}

std::vector<std::vector<float>> pooled(LLM& llm, const PoolingRequest& r) {
  std::vector<Prompt> ps;
  for (auto& p : r.prompts) ps.push_back(Prompt::of_ids(p));
  std::vector<std::vector<float>> out;
  for (auto& o : llm.encode(ps, *r.params.pooling)) out.push_back(o.pooled);
  return out;
}

void expect_api_error(const std::function<void()>& f, const std::string& param, const std::string& text) {
  try {
    f();
    FAIL() << "no error; expected one naming " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, param);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(PoolingProtocol, EmbeddingsFloatAndBase64) {
  LLM& llm = pooling_llm();
  const ModelInfo m = info(llm);
  const ojson body = {{"model", "tiny"}, {"input", {{5, 6, 7}, {8, 9, 10, 11}}}, {"encoding_format", "base64"}};
  PoolingRequest r = parse_embedding_request(body, m, PoolingEndpoint::Embeddings);
  ASSERT_EQ(r.prompts.size(), 2u);
  const auto outs = pooled(llm, r);
  const ojson b64 = pooling_response(r, outs, "embd-1", 7, "tiny");
  r.base64 = false;
  const ojson floats = pooling_response(r, outs, "embd-1", 7, "tiny");
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(floats["usage"]["total_tokens"], 7);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(floats["data"][i]["object"], "embedding");
    EXPECT_EQ(floats["data"][i]["index"], i);
    const auto f = floats["data"][i]["embedding"].get<std::vector<float>>();
    EXPECT_EQ(f.size(), 96u);
    EXPECT_EQ(from_base64(b64["data"][i]["embedding"].get<std::string>()), f);  // bit for bit
  }
  // Text goes through the tokenizer; truncate_prompt_tokens keeps the last tokens.
  const ojson text = {{"input", "a b"}, {"truncate_prompt_tokens", 1}};
  EXPECT_EQ(parse_embedding_request(text, m, PoolingEndpoint::Embeddings).prompts[0].size(), 1u);
  const ojson pool = {{"input", {5, 6}}};
  const PoolingRequest pr = parse_embedding_request(pool, m, PoolingEndpoint::Pooling);
  EXPECT_EQ(pooling_response(pr, pooled(llm, pr), "pool-1", 7, "tiny")["data"][0]["object"], "pooling");
}

TEST(PoolingProtocol, EmbeddingErrorsAsVllm) {
  const ModelInfo m = info(pooling_llm());
  auto parse = [&](ojson body) {
    return [&m, body] { parse_embedding_request(body, m, PoolingEndpoint::Embeddings); };
  };
  expect_api_error(parse({{"input", std::vector<int>(65, 5)}}), "input", "maximum context length is 64 tokens");
  expect_api_error(parse({{"input", {5}}, {"encoding_format", "int8"}}), "encoding_format", "'float' or 'base64'");
  expect_api_error(parse({{"input", {5}}, {"dimensions", 8}}), "dimensions", "does not support matryoshka");
  expect_api_error(parse({{"input", {5}}, {"truncate_prompt_tokens", 65}}), "truncate_prompt_tokens",
                   "is greater than max_model_len (64)");
  expect_api_error(parse({{"prompt", {5}}}), "input", "'input' is required");
  expect_api_error(parse({{"input", {5}}, {"activation", true}}), "activation", "does not support ['activation']");
  const LLM gen(test::tiny_cfg(), test::qwen3_tokenizer_dir());
  const ModelInfo g = info(gen);
  expect_api_error(
      [&] {
        parse_embedding_request({{"input", {5}}}, g, PoolingEndpoint::Embeddings);
      },
      "model", "The model does not support Embeddings API");
  expect_api_error(
      [&] {
        parse_rerank_request({{"query", "a"}, {"documents", {"b"}}}, g);
      },
      "model", "The model does not support Rerank (Score) API");
}

TEST(PoolingProtocol, ScoreAndRerankByCosine) {
  LLM& llm = pooling_llm();
  const ModelInfo m = info(llm);
  const PoolingRequest s = parse_score_request({{"text_1", "a b"}, {"text_2", {"a b", "c d e"}}}, m);
  ASSERT_TRUE(s.cosine);
  EXPECT_EQ(s.num_queries, 1u);
  ASSERT_EQ(s.prompts.size(), 3u);
  const ojson sr = pooling_response(s, pooled(llm, s), "score-1", 7, "tiny");
  ASSERT_EQ(sr["data"].size(), 2u);
  EXPECT_NEAR(sr["data"][0]["score"].get<double>(), 1.0, 1e-6);  // the query against itself
  EXPECT_LT(sr["data"][1]["score"].get<double>(), 0.9999);
  expect_api_error(
      [&] {
        parse_score_request({{"text_1", {"a", "b"}}, {"text_2", {"a", "b", "c"}}}, m);
      },
      "text_2", "1:1, 1:N or N:N");
  // The engine's own scores agree with the response's.
  const std::vector<double> direct =
      llm.score({Prompt::of_ids(s.prompts[0])}, {Prompt::of_ids(s.prompts[1]), Prompt::of_ids(s.prompts[2])});
  EXPECT_NEAR(direct[1], sr["data"][1]["score"].get<double>(), 1e-9);

  ojson body = {{"query", "a b"}, {"documents", {"c d e", "a b", {{"text", "f"}}}}, {"top_n", 2}};
  PoolingRequest rr = parse_rerank_request(body, m);
  const ojson res = pooling_response(rr, pooled(llm, rr), "rerank-1", 7, "tiny");
  ASSERT_EQ(res["results"].size(), 2u);      // top_n
  EXPECT_EQ(res["results"][0]["index"], 1);  // the document equal to the query first
  EXPECT_EQ(res["results"][0]["document"]["text"], "a b");
  EXPECT_GE(res["results"][0]["relevance_score"].get<double>(), res["results"][1]["relevance_score"].get<double>());
  body["return_documents"] = false;
  body["top_n"] = 0;
  rr = parse_rerank_request(body, m);
  const ojson all = pooling_response(rr, pooled(llm, rr), "rerank-2", 7, "tiny");
  ASSERT_EQ(all["results"].size(), 3u);
  EXPECT_FALSE(all["results"][0].contains("document"));
  for (size_t i = 1; i < 3; ++i)
    EXPECT_GE(all["results"][i - 1]["relevance_score"].get<double>(),
              all["results"][i]["relevance_score"].get<double>());
}

// A classifier's rerank: scores are the pairs' own outputs, sorted.
TEST(PoolingProtocol, RerankSortsClassifierScores) {
  PoolingRequest r;
  r.endpoint = PoolingEndpoint::Rerank;
  r.documents = {"x", "y", "z", "w"};
  r.prompts = {{1}, {2}, {3}, {4}};
  r.top_n = 3;
  const ojson res = pooling_response(r, {{0.2f}, {0.9f}, {0.5f}, {0.1f}}, "rerank-3", 7, "tiny");
  ASSERT_EQ(res["results"].size(), 3u);
  const int want[] = {1, 2, 0};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(res["results"][size_t(i)]["index"], want[i]);
  EXPECT_EQ(res["usage"]["total_tokens"], 4);
}
