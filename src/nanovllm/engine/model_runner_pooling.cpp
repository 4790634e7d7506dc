// The pooling runner's step (model_runner.h, models/pooling_model.h): the forward over the step's
// prompt chunks, whose last layer runs on the rows the poolers read from this chunk alone
// (CausalLM::forward's rows), which are read back as floats: LAST the prompt's last row (in its
// last chunk), CLS its first row (in its first chunk), MEAN every row. They are summed in double
// into Sequence::pool_sum across chunks; when the prompt is complete, the sum (MEAN: / prompt
// tokens) goes through the head (pooling_output) into Sequence::pooled. No LM head, no sampler:
// each sequence gets token 0, a placeholder that ends it (the engine gives pooling requests
// max_tokens 1 and drops the token).
// run() does both halves at once; async pooling steps (llm_engine.h) call launch_pool, then
// finish_pool once the engine has launched the next step.
#include <algorithm>

#include "nanovllm/engine/model_runner.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

ModelRunner::PoolLaunch ModelRunner::launch_pool(const ScheduledBatch& batch) {
  if (hidden_observer) throw Error("model runner: launch_pool with a hidden_observer (run() pools at once)");
  StepInputs in = prepare(batch, cfg_.block_size);
  return launch_pool(batch, in);
}

ModelRunner::PoolLaunch ModelRunner::launch_pool(const ScheduledBatch& batch, StepInputs& in) {
  const PoolingModel& pm = *pooling_;
  PoolLaunch p;
  std::vector<int32_t> rows;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const Sequence* s = batch.seqs[i];
    if (!s->params.pooling)
      throw Error("model runner: sequence " + std::to_string(s->id) + " is not a pooling request");
    const int32_t begin = in.md.cu_seqlens_q[i], end = in.md.cu_seqlens_q[i + 1];
    const bool first = s->num_cached_tokens == 0;
    const bool last = s->num_cached_tokens + s->num_scheduled_tokens >= s->num_prompt_tokens;
    const size_t from = rows.size();
    if (pm.type == PoolingType::Mean)
      for (int32_t r = begin; r < end; ++r) rows.push_back(r);
    else if (pm.type == PoolingType::Cls && first)
      rows.push_back(begin);
    else if (pm.type == PoolingType::Last && last)
      rows.push_back(end - 1);
    p.ids.push_back(s->id);
    p.span.emplace_back(from, rows.size());
    p.ends.push_back(last ? 1 : 0);
  }
  // The forward's last layer on the pooled rows alone, unless an observer reads every row.
  if (hidden_observer) {
    Tensor hidden = forward_hidden(in);
    hidden_observer(batch, backend_->to_host_f32(hidden));
    if (!rows.empty()) {
      Tensor picked = backend_->empty({int64_t(rows.size()), mcfg_.hidden_size}, hidden.dtype());
      backend_->gather_rows(hidden, rows, picked);
      p.rows.host = backend_->to_host_f32(picked);
    }
  } else {
    Tensor picked = forward_hidden(in, nullptr, &rows);  // [rows.size(), H]
    if (!rows.empty()) p.rows = backend_->to_host_f32_async(picked);
  }
  logprobs_.clear();
  prompt_logprobs_.clear();
  return p;
}

void ModelRunner::finish_pool(PoolLaunch& p, const std::vector<Sequence*>& seqs) {
  const PoolingModel& pm = *pooling_;
  const size_t H = size_t(mcfg_.hidden_size);
  if (seqs.size() != p.ids.size()) throw Error("model runner: finish_pool with a different number of sequences");
  const std::vector<float> host = backend_->wait_host_f32(p.rows);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence* s = seqs[i];
    if (!s) continue;  // aborted since the launch
    if (s->pool_sum.empty()) s->pool_sum.assign(H, 0.0);
    for (size_t r = p.span[i].first; r < p.span[i].second; ++r)
      for (size_t k = 0; k < H; ++k) s->pool_sum[k] += double(host[r * H + k]);
    if (!p.ends[i]) continue;
    if (pm.type == PoolingType::Mean)
      for (double& x : s->pool_sum) x /= double(s->num_prompt_tokens);
    s->pooled = pooling_output(pm, *s->params.pooling, s->pool_sum);
    s->pool_sum = {};
  }
}

std::vector<int32_t> ModelRunner::forward_and_pool(const ScheduledBatch& batch, StepInputs& in) {
  PoolLaunch p = launch_pool(batch, in);
  finish_pool(p, batch.seqs);
  return std::vector<int32_t>(batch.seqs.size(), 0);
}

}  // namespace nanovllm
