// A Qwen3-MoE checkpoint that computes a dense Qwen3 model, for tests without transformers: the
// tiny-qwen3-tied fixture with layer 0 made sparse (3 experts, top-2 renormalized, a random router),
// every expert a copy of the dense MLP under the published checkpoint's per-expert names, and layer 1
// kept dense through mlp_only_layers. Whatever the router picks, the top-2 weights sum to 1 and every
// expert gives the same output, so the model is the dense one. Used by the CPU test
// (unit/model/test_qwen3_moe_dense_equivalence.cpp) and the CUDA one (gpu/test_cuda_moe.cpp).
#pragma once
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "safetensors_writer.h"
#include "test_paths.h"

namespace nanovllm::test {

// Writes the MoE form of tiny-qwen3-tied into dir (config.json, generation_config.json,
// model.safetensors); returns the dense fixture's directory.
inline std::string write_moe_from_dense(const std::string& dir) {
  const std::string src = fixture("tiny-qwen3-tied");
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  const int64_t H = cfg["hidden_size"], I = cfg["intermediate_size"], E = 3;
  cfg["architectures"] = {"Qwen3MoeForCausalLM"};
  cfg["model_type"] = "qwen3_moe";
  cfg["num_experts"] = E;
  cfg["num_experts_per_tok"] = 2;
  cfg["norm_topk_prob"] = true;
  cfg["moe_intermediate_size"] = I;
  cfg["decoder_sparse_step"] = 1;
  cfg["mlp_only_layers"] = {1};
  std::ofstream(dir + "/config.json") << cfg.dump();
  std::filesystem::copy_file(src + "/generation_config.json", dir + "/generation_config.json");

  SafetensorsCheckpoint ckpt(src);
  std::map<std::string, StTensor> out;
  for (const auto& name : ckpt.names()) {
    const TensorInfo& t = ckpt.get(name);
    if (t.dtype != DType::BF16) throw Error(name + ": the fixture is BF16");
    StTensor st{"BF16", t.shape, std::string(static_cast<const char*>(t.data), t.nbytes)};
    const std::string p = "model.layers.0.mlp.";
    if (name.starts_with(p)) {  // gate_proj / up_proj / down_proj -> every expert's copy
      const std::string proj = name.substr(p.size());
      for (int64_t e = 0; e < E; ++e) out[p + "experts." + std::to_string(e) + "." + proj] = st;
    } else {
      out[name] = st;
    }
  }
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0, 1);
  std::string router(size_t(E * H) * 2, '\0');
  for (int64_t i = 0; i < E * H; ++i) {
    const uint16_t b = f32_to_bf16(d(rng));
    std::memcpy(router.data() + 2 * i, &b, 2);
  }
  out["model.layers.0.mlp.gate.weight"] = {"BF16", {E, H}, router};
  write_safetensors(dir + "/model.safetensors", out);

  return src;
}

struct GreedyRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logits;  // per step
};

// Greedy generation of 4 random prompts (1, 7, 90, 33 tokens; 10 tokens each) with small blocks and
// chunked prefill; cfg gives the model, device and precision.
inline GreedyRun generate_greedy(EngineConfig cfg, int max_tokens = 10) {
  cfg.kv_cache_memory = 8 << 20;
  cfg.block_size = 16;
  cfg.max_num_batched_tokens = 64;  // chunked prefill too
  cfg.max_num_seqs = 8;
  GreedyRun run;
  LLMEngine e(cfg);
  e.model_runner().logits_observer = [&](const ScheduledBatch&, const std::vector<float>& l) {
    run.logits.push_back(l);
  };
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  std::mt19937 rng(5);
  std::vector<int64_t> ids;
  for (int len : {1, 7, 90, 33}) {
    std::vector<int32_t> prompt(static_cast<size_t>(len));
    for (auto& t : prompt) t = int32_t(3 + rng() % 500);
    ids.push_back(e.add_request(prompt, p));
  }
  std::map<int64_t, std::vector<int32_t>> outs;
  while (e.has_unfinished())
    for (auto& o : e.step().finished) outs[o.request_id] = o.token_ids;
  for (auto id : ids) run.tokens.push_back(outs.at(id));
  return run;
}

}  // namespace nanovllm::test
