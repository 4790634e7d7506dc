// Runs the engine on a quantized checkpoint made by scripts/make_quantized_checkpoint.py: OUT/
// {config.json, prompts.json, ref_logits.f32 (float32 [prompts, vocab], transformers' last-token
// logits on the checkpoint's weights dequantized from the format's specification), ref_tokens.json
// ({max_new_tokens, tokens, margins, noise} per prompt)}. Each prompt alone, greedy: the first
// step's logits against ref_logits (cosine, max |difference|), the tokens against the reference's
// up to near-ties (near_tie.h; a margin under twice the prompt's measured max |difference| is one). Also checks that the engine took the checkpoint's format
// (model_runner().quantization()). Shared by the CPU fixtures test (tests/unit/models) and the CUDA
// one (tests/gpu/test_cuda_int_checkpoints.cpp).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_compare.h"
#include "near_tie.h"

namespace nanovllm::test {

struct IntCheckpointResult {
  size_t prompts = 0;       // prompts run
  double worst_cosine = 1;  // of the last-token logits against ref_logits
  double max_abs = 0;       // max |logit - reference| over those rows
  double max_ref = 0;       // max |reference logit|: the scale of max_abs
  int compared = 0;         // greedy tokens asserted equal (decisive steps)
  int diverged = 0;         // prompts that left the reference's path at a near-tie
};

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return nlohmann::json::parse(in);
}

// The engine's quantization scheme for a checkpoint's quantization_config (compressed-tensors'
// float-quantized FP8 runs the fp8 scheme).
inline Quantization expected_quantization(const nlohmann::json& qc) {
  const std::string m = qc.value("quant_method", "");
  if (m == "awq") return Quantization::AWQ;
  if (m == "gptq") return Quantization::GPTQ;
  if (m == "compressed-tensors")
    return qc.value("format", "") == "float-quantized" ? Quantization::FP8 : Quantization::CompressedTensors;
  throw std::runtime_error("quantization_config: quant_method '" + m + "' is not one of the checkpoint maker's");
}

// cfg.model is set to dir; at most max_prompts prompts and max_tokens greedy tokens each.
inline IntCheckpointResult check_int_checkpoint(const std::string& dir, EngineConfig cfg,
                                                size_t max_prompts = size_t(-1), size_t max_tokens = size_t(-1)) {
  IntCheckpointResult res;
  const auto prompts = read_json(dir + "/prompts.json")["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto ref = read_json(dir + "/ref_tokens.json");
  cfg.model = dir;
  LLMEngine e(cfg);
  EXPECT_EQ(e.model_runner().quantization(),
            expected_quantization(read_json(dir + "/config.json")["quantization_config"]))
      << dir;
  const int64_t V = e.model_config().vocab_size;
  std::vector<float> logits(prompts.size() * size_t(V));
  std::ifstream lin(dir + "/ref_logits.f32", std::ios::binary | std::ios::ate);
  const auto bytes = lin ? int64_t(lin.tellg()) : int64_t(-1);
  if (bytes != int64_t(logits.size() * 4)) {
    ADD_FAILURE() << dir << "/ref_logits.f32: " << bytes << " bytes, want " << prompts.size() << " prompts x " << V
                  << " logits x 4";
    return res;
  }
  lin.seekg(0);
  lin.read(reinterpret_cast<char*>(logits.data()), std::streamsize(logits.size() * 4));
  const size_t n = std::min(max_tokens, size_t(ref["max_new_tokens"].get<int>()));
  for (size_t i = 0; i < prompts.size() && i < max_prompts; ++i) {
    const GenRun run = generate(e, prompts[i], int(n));
    if (run.logits.empty()) {
      ADD_FAILURE() << dir << " prompt " << i << ": no logits";
      continue;
    }
    const std::vector<float> want(logits.begin() + int64_t(i) * V, logits.begin() + int64_t(i + 1) * V);
    res.worst_cosine = std::min(res.worst_cosine, cosine(run.logits[0], want));
    double dev = 0;  // this prompt's largest |logit - reference| at its first step
    for (int64_t v = 0; v < V; ++v) {
      dev = std::max(dev, double(std::fabs(run.logits[0][size_t(v)] - want[size_t(v)])));
      res.max_ref = std::max(res.max_ref, double(std::fabs(want[size_t(v)])));
    }
    res.max_abs = std::max(res.max_abs, dev);
    auto head = [n](const nlohmann::json& j, auto zero) {
      auto v = j.get<std::vector<decltype(zero)>>();
      v.resize(std::min(v.size(), n));
      return v;
    };
    // A BF16 reference's logits are BF16 values: two of them one ulp apart at the top logit's
    // magnitude (0.0625 in [8, 16), 0.125 in [16, 32)) may come from values any closer, so such a
    // margin is a tie at the reference's precision (the engine's F32 logits differ from it by ~0.3
    // at these sizes). Later steps' top logits are taken to be of the first step's magnitude.
    // And the engine's own distance from the reference: a greedy step flips only if the errors of
    // its two top logits add up past the reference's margin, and each is at most what the prompt's
    // first step measured (dev, ~0.3 for a BF16 engine through 28 random layers against cosine
    // 0.9997): margins under 2 dev are near-ties at the engine's precision (later steps taken to
    // err as much as the first). Exact engines (the CPU fixtures: dev ~1e-5) keep their margins.
    std::vector<double> noise = head(ref["noise"][i], 0.0);
    noise.resize(n, 0.0);
    double floor = 2 * dev;
    if (ref.value("dtype", std::string()) == "bfloat16") {
      double top = 0;
      for (float v : want) top = std::max(top, double(std::fabs(v)));
      floor = std::max(floor, top > 0 ? std::ldexp(1.0, std::ilogb(top) - 7) : 0.0);
    }
    for (double& v : noise) v = std::max(v, floor);
    const GreedyWalk w =
        expect_greedy_up_to_near_ties(run.tokens, head(ref["tokens"][i], int32_t(0)), head(ref["margins"][i], 0.0),
                                      noise, dir + " prompt " + std::to_string(i));
    res.compared += w.compared;
    res.diverged += w.diverged;
    ++res.prompts;
  }
  std::printf(
      "%s: %zu prompts, last-token logits cosine min %.6f, max |diff| %.3e (max |logit| %.2f); %d greedy "
      "tokens compared, %d prompts parted at a near-tie\n",
      dir.c_str(), res.prompts, res.worst_cosine, res.max_abs, res.max_ref, res.compared, res.diverged);
  return res;
}

}  // namespace nanovllm::test
