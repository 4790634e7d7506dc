// The pooling endpoints' bodies and responses (pooling_protocol.h).
#include "nanovllm/server/pooling_protocol.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "nanovllm/config/request_json.h"
#include "nanovllm/server/request_caps.h"

namespace nanovllm::server {

namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& msg, const std::string& code = "invalid_value") {
  throw ApiError(400, msg, param, code);
}

const ojson* get(const ojson& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

const PoolingModel& pooling_of(const ModelInfo& m, const char* api) {
  if (!m.llm || !m.llm->pooling_model()) refuse("model", std::string("The model does not support ") + api + " API");
  return *m.llm->pooling_model();
}

std::vector<int32_t> ids_of(const ojson& arr, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const ojson& t : arr) {
    if (!t.is_number_integer()) refuse(param, "'" + param + "' must hold integer token ids", "invalid_type");
    int64_t v = 0;
    try {
      v = request_integer(t, param);
    } catch (const InvalidRequest& e) {
      refuse(param, e.what(), "invalid_type");
    }
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      refuse(param, param + ": token id " + std::to_string(v) + " is out of range");
    ids.push_back(int32_t(v));
  }
  return ids;
}

struct Tokenize {
  const ModelInfo& m;
  bool specials = true;
  std::vector<int32_t> operator()(const std::string& text, const std::string& param) const {
    if (!m.llm || !m.llm->tokenizer())
      refuse(param, "the server has no tokenizer (--skip-tokenizer-init): send token ids", "no_tokenizer");
    check_text_bytes(int64_t(text.size()), param, m);
    try {
      return m.llm->tokenizer()->encode(text, specials);
    } catch (const UserError& e) {
      refuse(param, param + ": " + e.what());
    }
  }
};

// A text or token-id input, or a list of them (vLLM's input / text_1 / text_2 shapes).
std::vector<std::vector<int32_t>> inputs_of(const ojson& v, const std::string& param, const Tokenize& tok,
                                            bool allow_ids) {
  std::vector<std::vector<int32_t>> out;
  if (v.is_string()) {
    out.push_back(tok(v.get<std::string>(), param));
  } else if (v.is_array() && !v.empty() && v[0].is_number_integer() && allow_ids) {
    out.push_back(ids_of(v, param));
  } else if (v.is_array() && !v.empty()) {
    for (const ojson& e : v) {
      if (e.is_string())
        out.push_back(tok(e.get<std::string>(), param));
      else if (e.is_array() && allow_ids)
        out.push_back(ids_of(e, param));
      else
        refuse(param,
               "'" + param + "' must be a string, a list of strings" +
                   std::string(allow_ids ? ", token ids or a list of token-id lists" : ""),
               "invalid_type");
    }
  } else {
    refuse(param, "'" + param + "' must be a non-empty string or list", "invalid_type");
  }
  return out;
}

// truncate_prompt_tokens: keep the last k tokens (-1: max_model_len), then each input must fit.
void truncate_and_check(const ojson& body, const ModelInfo& m, std::vector<std::vector<int32_t>>& prompts,
                        const char* operation) {
  if (const ojson* t = get(body, "truncate_prompt_tokens")) {
    if (!t->is_number_integer())
      refuse("truncate_prompt_tokens", "'truncate_prompt_tokens' must be an integer", "invalid_type");
    int64_t k = request_integer(*t, "truncate_prompt_tokens");
    if (k == -1) k = m.max_model_len;
    if (k < 1) refuse("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 or at least 1");
    if (k > m.max_model_len)
      refuse("truncate_prompt_tokens", "truncate_prompt_tokens value (" + std::to_string(k) +
                                           ") is greater than max_model_len (" + std::to_string(m.max_model_len) +
                                           "). Please, select a smaller truncation size.");
    for (auto& p : prompts)
      if (int64_t(p.size()) > k) p.erase(p.begin(), p.end() - k);
  }
  for (auto& p : prompts) {
    if (p.empty()) refuse("input", "an input is empty");
    if (int64_t(p.size()) > m.max_model_len)
      refuse("input", "This model's maximum context length is " + std::to_string(m.max_model_len) +
                          " tokens. However, you requested " + std::to_string(p.size()) + " tokens in the input for " +
                          operation + ". Please reduce the length of the input.");
  }
}

std::optional<bool> optional_bool(const ojson& body, const char* key) {
  const ojson* v = get(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) refuse(key, std::string("'") + key + "' must be a boolean", "invalid_type");
  return v->get<bool>();
}

// A request of endpoint `ep` with the fields every pooling endpoint has (request_id, priority).
PoolingRequest begin_request(const ojson& body, PoolingEndpoint ep) {
  PoolingRequest r;
  r.endpoint = ep;
  if (const ojson* id = get(body, "request_id")) {
    if (!id->is_string()) refuse("request_id", "'request_id' must be a string", "invalid_type");
    r.request_id = id->get<std::string>();
  }
  if (const ojson* p = get(body, "priority")) {
    if (!p->is_number_integer()) refuse("priority", "'priority' must be an integer", "invalid_type");
    r.params.priority = int(std::clamp<int64_t>(request_integer(*p, "priority"), INT32_MIN, INT32_MAX));
  }
  return r;
}

// Score / rerank: pairs joined (a classifier) or queries then documents (cosine).
void pair_up(PoolingRequest& r, const PoolingModel& pm, std::vector<std::vector<int32_t>> queries,
             std::vector<std::vector<int32_t>> docs) {
  if (queries.size() != 1 && queries.size() != docs.size())
    refuse("text_2", "Input lengths must be either 1:1, 1:N or N:N, got " + std::to_string(queries.size()) + ":" +
                         std::to_string(docs.size()));
  r.params.pooling.emplace().task = pm.classify ? PoolingTask::Score : PoolingTask::Embed;
  if (!pm.classify) {
    r.cosine = true;
    r.num_queries = queries.size();
    r.prompts = std::move(queries);
    for (auto& d : docs) r.prompts.push_back(std::move(d));
    return;
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    std::vector<int32_t> p = queries[queries.size() == 1 ? 0 : i];
    p.insert(p.end(), docs[i].begin(), docs[i].end());
    r.prompts.push_back(std::move(p));
  }
}

void set_activation(const ojson& body, const PoolingModel& pm, PoolingRequest& r) {
  const std::optional<bool> act = optional_bool(body, "activation");
  if (act && !pm.classify)
    refuse("activation", "an embedding model scores by cosine similarity: 'activation' does not apply");
  r.params.pooling->activation = act;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    dot += double(a[k]) * b[k];
    na += double(a[k]) * a[k];
    nb += double(b[k]) * b[k];
  }
  return dot / std::max(std::sqrt(na) * std::sqrt(nb), 1e-8);
}

}  // namespace

PoolingRequest parse_embedding_request(const ojson& body, const ModelInfo& m, PoolingEndpoint ep) {
  const bool embeddings = ep == PoolingEndpoint::Embeddings;
  const PoolingModel& pm = pooling_of(m, embeddings ? "Embeddings" : "Pooling");
  PoolingRequest r = begin_request(body, ep);
  if (get(body, "messages")) refuse("messages", "chat-style embedding requests (messages) are not implemented");
  const ojson* input = get(body, "input");
  if (!input) refuse("input", "'input' is required", "missing_field");
  const std::optional<bool> specials = optional_bool(body, "add_special_tokens");
  r.prompts = inputs_of(*input, "input", Tokenize{m, specials.value_or(true)}, true);
  truncate_and_check(body, m, r.prompts, "embedding generation");
  if (const ojson* f = get(body, "encoding_format")) {
    if (*f != "float" && *f != "base64") refuse("encoding_format", "Input should be 'float' or 'base64'");
    r.base64 = *f == "base64";
  }
  if (const ojson* u = get(body, "user"); u && !u->is_string())
    refuse("user", "'user' must be a string", "invalid_type");
  PoolingParams p;
  p.task = pm.classify ? PoolingTask::Classify : PoolingTask::Embed;
  if (embeddings && pm.classify) refuse("model", "The model does not support Embeddings API");
  if (const ojson* d = get(body, "dimensions")) {
    if (!d->is_number_integer()) refuse("dimensions", "'dimensions' must be an integer", "invalid_type");
    p.dimensions = request_integer(*d, "dimensions");
  }
  p.normalize = optional_bool(body, "normalize");
  p.activation = optional_bool(body, "activation");
  try {
    check_pooling_params(pm, p);
  } catch (const InvalidRequest& e) {
    refuse(e.param, e.what());
  }
  r.params.pooling = p;
  return r;
}

PoolingRequest parse_score_request(const ojson& body, const ModelInfo& m) {
  const PoolingModel& pm = pooling_of(m, "Score");
  PoolingRequest r = begin_request(body, PoolingEndpoint::Score);
  const ojson* t1 = get(body, "text_1");
  const ojson* t2 = get(body, "text_2");
  if (!t1) refuse("text_1", "'text_1' is required", "missing_field");
  if (!t2) refuse("text_2", "'text_2' is required", "missing_field");
  // A decoder-only pair is the two texts' tokens joined: the document gets no special tokens.
  pair_up(r, pm, inputs_of(*t1, "text_1", Tokenize{m, true}, false),
          inputs_of(*t2, "text_2", Tokenize{m, false}, false));
  set_activation(body, pm, r);
  truncate_and_check(body, m, r.prompts, "score");
  return r;
}

PoolingRequest parse_rerank_request(const ojson& body, const ModelInfo& m) {
  const PoolingModel& pm = pooling_of(m, "Rerank (Score)");
  PoolingRequest r = begin_request(body, PoolingEndpoint::Rerank);
  const ojson* q = get(body, "query");
  if (!q || !q->is_string()) refuse("query", "'query' must be a string", q ? "invalid_type" : "missing_field");
  const ojson* docs = get(body, "documents");
  if (!docs || !docs->is_array() || docs->empty())
    refuse("documents", "'documents' must be a non-empty list", docs ? "invalid_type" : "missing_field");
  for (const ojson& d : *docs) {
    if (d.is_string())
      r.documents.push_back(d.get<std::string>());
    else if (d.is_object() && d.contains("text") && d["text"].is_string())
      r.documents.push_back(d["text"].get<std::string>());
    else
      refuse("documents", "each document must be a string or an object with a 'text' string", "invalid_type");
  }
  if (const ojson* n = get(body, "top_n")) {
    if (!n->is_number_integer()) refuse("top_n", "'top_n' must be an integer", "invalid_type");
    r.top_n = request_integer(*n, "top_n");
    if (r.top_n < 0) refuse("top_n", "top_n must be >= 0 (0: all documents)");
  }
  r.return_documents = optional_bool(body, "return_documents").value_or(true);
  const Tokenize with{m, true}, without{m, false};
  std::vector<std::vector<int32_t>> doc_ids;
  for (const std::string& d : r.documents) doc_ids.push_back(without(d, "documents"));
  pair_up(r, pm, {with(q->get<std::string>(), "query")}, std::move(doc_ids));
  set_activation(body, pm, r);
  truncate_and_check(body, m, r.prompts, "score");
  return r;
}

std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = char((u >> (8 * b)) & 0xff);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t k = 0; k < 3; ++k) w = (w << 8) | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(w >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

ojson pooling_response(const PoolingRequest& r, const std::vector<std::vector<float>>& outputs, const std::string& id,
                       int64_t created, const std::string& model) {
  int64_t prompt_tokens = 0;
  for (auto& p : r.prompts) prompt_tokens += int64_t(p.size());
  const ojson usage = {{"prompt_tokens", prompt_tokens},
                       {"total_tokens", prompt_tokens},
                       {"completion_tokens", 0},
                       {"prompt_tokens_details", nullptr}};
  std::vector<double> scores;
  if (r.endpoint == PoolingEndpoint::Score || r.endpoint == PoolingEndpoint::Rerank) {
    if (r.cosine)
      for (size_t i = r.num_queries; i < outputs.size(); ++i)
        scores.push_back(cosine(outputs[r.num_queries == 1 ? 0 : i - r.num_queries], outputs[i]));
    else
      for (auto& o : outputs) scores.push_back(o.empty() ? 0.0 : double(o[0]));
  }
  ojson data = ojson::array();
  if (r.endpoint == PoolingEndpoint::Rerank) {
    std::vector<size_t> order(scores.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    if (r.top_n > 0 && size_t(r.top_n) < order.size()) order.resize(size_t(r.top_n));
    for (size_t i : order) {
      ojson res = {{"index", i}};
      if (r.return_documents) res["document"] = {{"text", r.documents.at(i)}};
      res["relevance_score"] = scores[i];
      data.push_back(std::move(res));
    }
    return {{"id", id}, {"model", model}, {"usage", {{"total_tokens", prompt_tokens}}}, {"results", std::move(data)}};
  }
  for (size_t i = 0; i < outputs.size() && r.endpoint != PoolingEndpoint::Score; ++i) {
    const char* object = r.endpoint == PoolingEndpoint::Embeddings ? "embedding" : "pooling";
    const char* key = r.endpoint == PoolingEndpoint::Embeddings ? "embedding" : "data";
    ojson item = {{"index", i}, {"object", object}};
    item[key] = r.base64 ? ojson(base64_floats(outputs[i])) : ojson(outputs[i]);
    data.push_back(std::move(item));
  }
  for (size_t i = 0; i < scores.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  return {{"id", id},       {"object", "list"},        {"created", created},
          {"model", model}, {"data", std::move(data)}, {"usage", usage}};
}

}  // namespace nanovllm::server
