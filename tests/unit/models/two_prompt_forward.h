// A CausalLM's forward on the CPU backend for the model tests: dummy weights on a tiny fixture's
// config, two prompts (13 and 21 tokens) prefilled in one step on a fresh cache.
#pragma once
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/weights.h"
#include "test_paths.h"

namespace nanovllm::test {

struct Run {
  std::vector<float> hidden;   // the forward's output
  std::vector<float> k_cache;  // every layer's K cache after it
  int64_t rows = 0;            // its rows
};

// rows: CausalLM::forward's rows (null: every row). loaded: called after finalize_weights (a
// transform of the loaded model on its backend).
inline Run two_prompt_forward(const std::string& fixture, CpuPrecision precision, const std::vector<int32_t>* rows,
                              const std::function<void(CausalLM&, Backend&)>& loaded = nullptr) {
  const ModelConfig cfg = load_model_config(test::fixture(fixture));
  auto be = make_cpu_backend(2, precision);
  auto model = create_model(cfg, *be);
  auto specs = model->weight_specs();
  load_dummy_weights(*be, specs);
  model->finalize_weights();
  if (loaded) loaded(*model, *be);
  const int64_t bs = 16, blocks = 4, L = cfg.num_hidden_layers, Hkv = cfg.num_key_value_heads, D = cfg.head_dim;
  std::vector<LayerKVCache> kv;
  const std::vector<float> zeros(size_t(blocks * bs * Hkv * D), 0.f);
  for (int64_t l = 0; l < L; ++l) {
    Tensor k = be->empty({blocks, bs, Hkv, D}, be->act_dtype()), v = be->empty({blocks, bs, Hkv, D}, be->act_dtype());
    be->upload(zeros.data(), DType::F32, k);
    be->upload(zeros.data(), DType::F32, v);
    kv.push_back({k, v, {}});
  }
  std::vector<int32_t> a(13), b(21);
  std::iota(a.begin(), a.end(), 7);
  std::iota(b.begin(), b.end(), 40);
  Sequence s1(1, a, SamplingParams{}, bs, 0), s2(2, b, SamplingParams{}, bs, 0);
  s1.block_table = {0};
  s2.block_table = {1, 2};
  s1.num_scheduled_tokens = 13, s2.num_scheduled_tokens = 21;
  ScheduledBatch batch;
  batch.seqs = {&s1, &s2};
  batch.is_prefill = true;
  StepInputs in = ModelRunner::prepare(batch, bs);
  const int64_t T = int64_t(in.input_ids.size());
  Tensor ids = be->empty({T}, DType::I32), pos = be->empty({T}, DType::I32);
  be->upload(in.input_ids.data(), DType::I32, ids);
  be->upload(in.positions.data(), DType::I32, pos);
  be->prepare_metadata(in.md);
  Tensor h = model->forward(ids, pos, kv, in.md, rows);
  Run r;
  r.hidden = be->to_host_f32(h);
  r.rows = h.size(0);
  for (auto& layer : kv) {
    const auto k = be->to_host_f32(layer.k);
    r.k_cache.insert(r.k_cache.end(), k.begin(), k.end());
  }
  return r;
}

}  // namespace nanovllm::test
