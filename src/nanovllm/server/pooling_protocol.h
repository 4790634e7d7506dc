// JSON in and out for the pooling endpoints, in vLLM's shapes (vllm/entrypoints/openai/protocol.py):
//  POST /v1/embeddings  EmbeddingCompletionRequest: input (a string, a list of strings, token ids or
//                       a list of token-id lists), encoding_format float | base64 (little-endian
//                       float32), dimensions, user, truncate_prompt_tokens (keep the last k; -1:
//                       max_model_len), add_special_tokens, normalize, priority, request_id
//  POST /pooling        vLLM's raw pooling: the same input, the model's output per input ("data")
//  POST /score          text_1 (a string or a list), text_2 (a string or a list): 1:1, 1:N, N:N
//  POST /rerank, /v1/rerank, /v2/rerank  query, documents (strings or {"text": ...}), top_n (0: all),
//                       return_documents (Jina/Cohere; default true): results by relevance_score
// A classification model scores the pair's tokens joined (query then document); an embedding
// model scores by the cosine similarity of the two embeddings (as vLLM's /score for embed models).
// Every problem throws ApiError naming the field; a generative model gets vLLM's "does not support".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

enum class PoolingEndpoint { Embeddings, Pooling, Score, Rerank };

struct PoolingRequest {
  PoolingEndpoint endpoint = PoolingEndpoint::Embeddings;
  std::vector<std::vector<int32_t>> prompts;  // one engine request each (score by cosine: queries, then documents)
  SamplingParams params;                      // params.pooling set
  bool base64 = false;                        // encoding_format base64
  std::string request_id;
  // Score and rerank.
  size_t num_queries = 0;              // by cosine: the first num_queries prompts are the queries
  bool cosine = false;                 // an embedding model: cosine of query and document embeddings
  std::vector<std::string> documents;  // rerank: the documents' texts (return_documents)
  int64_t top_n = 0;                   // rerank: the best top_n (0: all)
  bool return_documents = true;
};

PoolingRequest parse_embedding_request(const ojson& body, const ModelInfo& m,
                                       PoolingEndpoint ep);  // embeddings, pooling
PoolingRequest parse_score_request(const ojson& body, const ModelInfo& m);
PoolingRequest parse_rerank_request(const ojson& body, const ModelInfo& m);

// The response to `r` from its outputs (one per prompt, in order). id: the response id.
ojson pooling_response(const PoolingRequest& r, const std::vector<std::vector<float>>& outputs, const std::string& id,
                       int64_t created, const std::string& model);

// The little-endian float32 bytes of v in base64 (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& v);

}  // namespace nanovllm::server
