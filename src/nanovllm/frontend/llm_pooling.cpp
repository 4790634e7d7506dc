// LLM's pooling calls (llm.h): encode (embeddings, class scores) and score (query/document
// relevance: a classifier over the joined pair, or the cosine of two embeddings), both through
// LLM::generate's one loop over the request tracker.
#include <cmath>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

std::vector<int32_t> classifier_token_ids(const Tokenizer& tok, const std::vector<std::string>& tokens) {
  std::vector<int32_t> ids;
  for (const std::string& t : tokens) {
    const std::optional<int32_t> id = tok.token_to_id(t);
    if (!id) throw UserError("--hf-overrides classifier_from_token: '" + t + "' is not a token of the vocabulary");
    ids.push_back(*id);
  }
  return ids;
}

std::vector<RequestOutput> LLM::encode(const std::vector<Prompt>& prompts, const PoolingParams& params, bool progress,
                                       const std::function<void()>& after_step) {
  if (!pooling_model())
    throw InvalidRequest("model",
                         "encode/embed/score are only supported for pooling models (--runner pooling); "
                         "this model is generative");
  SamplingParams sp;
  sp.pooling = params;
  return generate(prompts, {sp}, progress, after_step);
}

std::vector<double> LLM::score(const std::vector<Prompt>& queries, const std::vector<Prompt>& documents,
                               std::optional<bool> activation, const std::function<void()>& after_step) {
  if (!pooling_model())
    throw InvalidRequest("model",
                         "score is only supported for pooling models (--runner pooling); this model is "
                         "generative");
  if (queries.empty() || documents.empty()) throw InvalidRequest("documents", "score needs a query and documents");
  if (queries.size() != 1 && queries.size() != documents.size())
    throw InvalidRequest("documents", "input lengths must be either 1:1, 1:N or N:N (got " +
                                          std::to_string(queries.size()) + ":" + std::to_string(documents.size()) +
                                          ")");
  const auto query_of = [&](size_t i) -> const Prompt& { return queries[queries.size() == 1 ? 0 : i]; };
  std::vector<double> scores;
  if (pooling_model()->classify) {
    std::vector<Prompt> pairs;
    for (size_t i = 0; i < documents.size(); ++i) {
      std::vector<int32_t> ids = to_token_ids(query_of(i));
      const std::vector<int32_t> doc = to_token_ids(documents[i]);
      ids.insert(ids.end(), doc.begin(), doc.end());
      pairs.push_back(Prompt::of_ids(std::move(ids)));
    }
    PoolingParams p;
    p.task = PoolingTask::Score;
    p.activation = activation;
    for (const RequestOutput& o : encode(pairs, p, false, after_step)) scores.push_back(o.pooled.at(0));
    return scores;
  }
  if (activation) throw InvalidRequest("activation", "an embedding model scores by cosine similarity: no activation");
  std::vector<Prompt> all(queries.begin(), queries.end());
  all.insert(all.end(), documents.begin(), documents.end());
  const std::vector<RequestOutput> emb = encode(all, PoolingParams{}, false, after_step);  // task embed
  for (size_t i = 0; i < documents.size(); ++i) {
    const std::vector<float>& a = emb[queries.size() == 1 ? 0 : i].pooled;
    const std::vector<float>& b = emb[queries.size() + i].pooled;
    double dot = 0, na = 0, nb = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      dot += double(a[k]) * b[k];
      na += double(a[k]) * a[k];
      nb += double(b[k]) * b[k];
    }
    scores.push_back(dot / std::max(std::sqrt(na) * std::sqrt(nb), 1e-8));  // torch cosine_similarity's eps
  }
  return scores;
}

}  // namespace nanovllm
