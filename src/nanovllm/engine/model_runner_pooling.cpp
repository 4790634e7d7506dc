// The pooling runner's step (model_runner.h, models/pooling_model.h): the forward over the step's
// prompt chunks, whose last layer runs on the rows the poolers read from this chunk alone
// (CausalLM::forward's rows), which are read back as floats: LAST the prompt's last row (in its
// last chunk), CLS its first row (in its first chunk), MEAN every row. They are summed in double
// into Sequence::pool_sum across chunks; when the prompt is complete, the sum (MEAN: / prompt
// tokens) goes through the head (pooling_output) into Sequence::pooled. No LM head, no sampler:
// each sequence gets token 0, a placeholder that ends it (the engine gives pooling requests
// max_tokens 1 and drops the token).
#include <algorithm>

#include "nanovllm/engine/model_runner.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

std::vector<int32_t> ModelRunner::forward_and_pool(const ScheduledBatch& batch, StepInputs& in) {
  const PoolingModel& pm = *pooling_;
  const int64_t H = mcfg_.hidden_size;
  std::vector<int32_t> rows;
  std::vector<std::pair<size_t, size_t>> span(batch.seqs.size());  // per sequence: [first, end) in rows
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const Sequence* s = batch.seqs[i];
    if (!s->params.pooling)
      throw Error("model runner: sequence " + std::to_string(s->id) + " is not a pooling request");
    const int32_t begin = in.md.cu_seqlens_q[i], end = in.md.cu_seqlens_q[i + 1];
    const bool first = s->num_cached_tokens == 0;
    const bool last = s->num_cached_tokens + s->num_scheduled_tokens >= s->num_prompt_tokens;
    span[i].first = rows.size();
    if (pm.type == PoolingType::Mean)
      for (int32_t r = begin; r < end; ++r) rows.push_back(r);
    else if (pm.type == PoolingType::Cls && first)
      rows.push_back(begin);
    else if (pm.type == PoolingType::Last && last)
      rows.push_back(end - 1);
    span[i].second = rows.size();
  }
  // The forward's last layer on the pooled rows alone, unless an observer reads every row.
  std::vector<float> host;
  if (hidden_observer) {
    Tensor hidden = forward_hidden(in);
    hidden_observer(batch, backend_->to_host_f32(hidden));
    if (!rows.empty()) {
      Tensor picked = backend_->empty({int64_t(rows.size()), H}, hidden.dtype());
      backend_->gather_rows(hidden, rows, picked);
      host = backend_->to_host_f32(picked);
    }
  } else {
    Tensor picked = forward_hidden(in, nullptr, &rows);  // [rows.size(), H]
    if (!rows.empty()) host = backend_->to_host_f32(picked);
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    Sequence* s = batch.seqs[i];
    if (s->pool_sum.empty()) s->pool_sum.assign(size_t(H), 0.0);
    for (size_t r = span[i].first; r < span[i].second; ++r)
      for (int64_t k = 0; k < H; ++k) s->pool_sum[size_t(k)] += double(host[r * size_t(H) + size_t(k)]);
    if (s->num_cached_tokens + s->num_scheduled_tokens < s->num_prompt_tokens) continue;
    if (pm.type == PoolingType::Mean)
      for (double& x : s->pool_sum) x /= double(s->num_prompt_tokens);
    s->pooled = pooling_output(pm, *s->params.pooling, s->pool_sum);
    s->pool_sum = {};
  }
  logprobs_.clear();
  prompt_logprobs_.clear();
  return std::vector<int32_t>(batch.seqs.size(), 0);
}

}  // namespace nanovllm
