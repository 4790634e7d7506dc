// The CUDA engine against transformers (bf16, GPU) at Qwen3-0.6B size with random weights (or any
// shape of the reference script's --arch: Llama-3.1-8B, Qwen2.5-7B, ...; sizes come from config.json):
// last-token logits of 64 prompts of lengths 1..3000, all in one batch (chunked prefill,
// paged KV, prefix-free), and prompts of 8K and 32K tokens one at a time. Needs NANOVLLM_HF06B_DIR made by
// scripts/make_qwen3_06b_reference.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"

using namespace nanovllm;

namespace {

// Cosine of two logit rows of V entries and the argmax of each.
struct LogitsMatch {
  double cosine = 0;
  int64_t ref_top = 0, got_top = 0;
};

// The reference model's config.json (any family the reference script makes: --arch).
nlohmann::json model_config(const char* dir) {
  std::ifstream in(std::string(dir) + "/config.json");
  EXPECT_TRUE(in) << dir << "/config.json";
  return in ? nlohmann::json::parse(in) : nlohmann::json::object();
}

// "LlamaForCausalLM, 32 layers, hidden 4096": what the run compared, for the printed summary.
std::string describe(const nlohmann::json& c) {
  return c.value("architectures", nlohmann::json::array({"?"}))[0].get<std::string>() + ", " +
         std::to_string(c.value("num_hidden_layers", 0)) + " layers, hidden " +
         std::to_string(c.value("hidden_size", 0));
}

LogitsMatch match_logits(const float* r, const float* g, int64_t V) {
  double dot = 0, nr = 0, ng = 0;
  LogitsMatch m;
  for (int64_t v = 0; v < V; ++v) {
    dot += double(r[v]) * g[v];
    nr += double(r[v]) * r[v];
    ng += double(g[v]) * g[v];
    if (r[v] > r[m.ref_top]) m.ref_top = v;
    if (g[v] > g[m.got_top]) m.got_top = v;
  }
  m.cosine = dot / std::sqrt(nr * ng);
  return m;
}

}  // namespace

TEST(HFQwen3_06B, LastTokenLogitsMatchTransformers) {
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  ASSERT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  std::ifstream pin(std::string(dir) + "/prompts.json");
  ASSERT_TRUE(pin);
  auto prompts = nlohmann::json::parse(pin)["prompts"].get<std::vector<std::vector<int32_t>>>();
  const nlohmann::json mc = model_config(dir);
  const int64_t V = mc.value("vocab_size", int64_t(0)), P = int64_t(prompts.size());
  ASSERT_GT(V, 0);
  std::vector<float> ref(size_t(P * V));
  std::ifstream lin(std::string(dir) + "/ref_logits.f32", std::ios::binary);
  ASSERT_TRUE(lin.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * 4)));

  std::vector<float> ref32(size_t(P * V));
  std::ifstream lin32(std::string(dir) + "/ref_logits_fp32.f32", std::ios::binary);
  ASSERT_TRUE(lin32.read(reinterpret_cast<char*>(ref32.data()), std::streamsize(ref32.size() * 4)));

  EngineConfig cfg;
  cfg.model = dir;
  cfg.device = DeviceChoice::Cuda;
  cfg.gpu_memory_utilization = 0.5;
  // Diagnostics (the assertions below are for the defaults): another device, token budget, or a
  // single prompt, e.g. NANOVLLM_HF06B_DEVICE=cpu NANOVLLM_HF06B_ONLY=38.
  if (const char* d = std::getenv("NANOVLLM_HF06B_DEVICE")) cfg.device = parse_device_choice(d);
  if (const char* m = std::getenv("NANOVLLM_HF06B_MAX_BATCHED")) cfg.max_num_batched_tokens = std::atoll(m);
  int64_t only = -1;
  if (const char* o = std::getenv("NANOVLLM_HF06B_ONLY")) only = std::atoll(o);
  LLMEngine e(cfg);
  std::map<int64_t, std::vector<float>> got;
  e.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    for (size_t i = 0; i < b.seqs.size(); ++i)
      if (b.seqs[i]->num_completion_tokens() == 0 &&
          b.seqs[i]->num_cached_tokens + b.seqs[i]->num_scheduled_tokens == b.seqs[i]->num_tokens())
        got[b.seqs[i]->id].assign(l.begin() + int64_t(i) * V, l.begin() + int64_t(i + 1) * V);
  };
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 1;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i)
    ids.push_back(only < 0 || int64_t(i) == only ? e.add_request(prompts[i], sp) : -1);
  while (e.has_unfinished()) e.step();
  double min_cos = 1, sum_cos = 0;
  int agree = 0;
  for (int64_t i = 0; i < P; ++i) {
    if (ids[size_t(i)] < 0) {  // not run (NANOVLLM_HF06B_ONLY)
      got[-1 - i] = std::vector<float>(ref.begin() + i * V, ref.begin() + (i + 1) * V);
      ids[size_t(i)] = -1 - i;
    }
    const auto& g = got.at(ids[size_t(i)]);
    const float* r = ref.data() + i * V;
    const LogitsMatch lm = match_logits(r, g.data(), V);
    const double cos = lm.cosine;
    const int64_t ar = lm.ref_top, ag = lm.got_top;
    min_cos = std::min(min_cos, cos);
    sum_cos += cos;
    agree += ar == ag;
    if (ar != ag) {
      // Where top-1 differs, show how close the call was in both.
      float r2 = -INFINITY;
      for (int64_t v = 0; v < V; ++v)
        if (v != ar) r2 = std::max(r2, r[v]);
      const float* e32 = ref32.data() + i * V;
      const int64_t a32 = std::max_element(e32, e32 + V) - e32;
      std::printf(
          "prompt %lld (%zu tokens): reference top-1 %lld (%.4f, margin %.4f over the next), ours %lld "
          "(ours gives the reference's top-1 %.4f and ours %.4f; float32 run: top-1 %lld, %.4f vs %.4f)\n",
          (long long)i, prompts[size_t(i)].size(), (long long)ar, r[ar], r[ar] - r2, (long long)ag, g[size_t(ar)],
          g[size_t(ag)], (long long)a32, e32[ar], e32[ag]);
    }
  }
  std::printf("%s, random weights, %lld prompts: cosine min %.6f mean %.6f, top-1 agreement %d/%lld\n",
              describe(mc).c_str(), (long long)P, min_cos, sum_cos / double(P), agree, (long long)P);
  // Context: how far each bf16 implementation is from the float32 computation of the same weights.
  auto top1_vs_fp32 = [&](auto logits_of) {
    int n = 0;
    for (int64_t i = 0; i < P; ++i) {
      const float* e = ref32.data() + i * V;
      const float* x = logits_of(i);
      n += std::max_element(e, e + V) - e == std::max_element(x, x + V) - x;
    }
    return n;
  };
  std::printf("top-1 agreement with transformers float32: ours %d/%lld, transformers bf16 %d/%lld\n",
              top1_vs_fp32([&](int64_t i) { return got.at(ids[size_t(i)]).data(); }), (long long)P,
              top1_vs_fp32([&](int64_t i) { return ref.data() + i * V; }), (long long)P);
  // Per-prompt cosine with the float32 run, for ours and for transformers bf16: which prompts carry
  // our error (the lowest five are printed with their lengths).
  auto cos_vs_fp32 = [&](auto logits_of) {
    std::vector<double> c(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) c[size_t(i)] = match_logits(ref32.data() + i * V, logits_of(i), V).cosine;
    return c;
  };
  const auto ours32 = cos_vs_fp32([&](int64_t i) { return got.at(ids[size_t(i)]).data(); });
  const auto hf32 = cos_vs_fp32([&](int64_t i) { return ref.data() + i * V; });
  auto min_mean = [](const std::vector<double>& c) {
    double s = 0;
    for (double x : c) s += x;
    return std::make_pair(*std::min_element(c.begin(), c.end()), s / double(c.size()));
  };
  std::printf("cosine with transformers float32 (min/mean): ours %.6f/%.6f, transformers bf16 %.6f/%.6f\n",
              min_mean(ours32).first, min_mean(ours32).second, min_mean(hf32).first, min_mean(hf32).second);
  std::vector<int64_t> order(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ours32[size_t(a)] < ours32[size_t(b)]; });
  for (size_t k = 0; k < 5 && k < order.size(); ++k) {
    const int64_t i = order[k];
    std::printf("  prompt %lld (%zu tokens): cosine with float32 ours %.6f, transformers bf16 %.6f\n", (long long)i,
                prompts[size_t(i)].size(), ours32[size_t(i)], hf32[size_t(i)]);
  }
  EXPECT_GE(min_cos, 0.999);
  EXPECT_GE(double(agree) / double(P), 0.99);
}

// Where the error grows: the residual stream of the last token of one prompt (the reference
// script's dump_prompt, by default the one our logits are worst on), after every layer's
// attention add and after every layer, against transformers' float32 run of the same weights,
// beside transformers bf16's own distance to it. Expectation: like transformers bf16, we stay
// within cosine 0.999 of float32 at every point.
TEST(HFQwen3_06B, PerLayerStreamNearFloat32) {
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  ASSERT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  std::ifstream pin(std::string(dir) + "/prompts.json");
  ASSERT_TRUE(pin);
  const auto j = nlohmann::json::parse(pin);
  const int64_t idx = j.value("dump_prompt", int64_t(-1));
  ASSERT_GE(idx, 0) << "prompts.json has no dump_prompt: re-run the reference script";
  const auto prompt = j["prompts"][size_t(idx)].get<std::vector<int32_t>>();
  const nlohmann::json mc = model_config(dir);
  const int64_t L = mc.value("num_hidden_layers", int64_t(0)), H = mc.value("hidden_size", int64_t(0));
  ASSERT_GT(L * H, 0);
  auto read = [&](const std::string& name) {
    std::vector<float> v(size_t(L * 2 * H));
    std::ifstream in(std::string(dir) + "/" + name, std::ios::binary);
    EXPECT_TRUE(in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4))) << name;
    return v;
  };
  const auto hf = read("layers_bf16.f32"), f32 = read("layers_fp32.f32");

  // Our stream on a device: [L, 2, H] (stage 0 after the attention add, 1 after the layer).
  auto run = [&](const std::string& device) {
    EngineConfig cfg;
    cfg.model = dir;
    cfg.device = parse_device_choice(device);
    cfg.gpu_memory_utilization = 0.5;
    LLMEngine e(cfg);
    std::vector<float> ours(size_t(L * 2 * H), NAN);
    // NANOVLLM_HF06B_DUMP=DIR: also writes layer 0's stream after the attention add, every token
    // ([T, H] float32), to DIR/layer0_attn_<device>.f32, for scripts/compare_layer0.py.
    const char* dump = std::getenv("NANOVLLM_HF06B_DUMP");
    e.model_runner().model().layer_observer = [&](int64_t layer, int stage, const Tensor& stream) {
      const auto host = e.model_runner().backend().to_host_f32(stream);  // [T, H]: keep the last row
      std::copy(host.end() - H, host.end(), ours.begin() + (layer * 2 + stage) * H);
      if (dump && layer == 0 && stage == 0) {
        std::ofstream f(std::string(dump) + "/layer0_attn_" + device + ".f32", std::ios::binary);
        f.write(reinterpret_cast<const char*>(host.data()), std::streamsize(host.size() * 4));
      }
    };
    SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = 1;
    e.add_request(prompt, sp);
    while (e.has_unfinished()) e.step();
    e.model_runner().model().layer_observer = nullptr;
    EXPECT_EQ(std::count_if(ours.begin(), ours.end(), [](float v) { return std::isnan(v); }), 0)
        << "every layer's two stages are observed on " << device;
    return ours;
  };
  const auto ours = run("cuda");
  // The CPU backend (FP32 math on the same BF16 weights) beside it: tells a CUDA kernel's error
  // from one shared by both backends (the model code, the engine's inputs).
  const auto cpu = run("cpu");

  auto cosine = [&](const float* a, const float* b) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < H; ++i) {
      dot += double(a[i]) * b[i];
      na += double(a[i]) * a[i];
      nb += double(b[i]) * b[i];
    }
    return dot / std::sqrt(na * nb);
  };
  std::printf("prompt %lld (%zu tokens), last token's residual stream, cosine with transformers float32:\n",
              (long long)idx, prompt.size());
  std::printf("layer  after-attn: cuda / cpu / hf-bf16         after-layer: cuda / cpu / hf-bf16\n");
  double worst = 1;
  for (int64_t l = 0; l < L; ++l) {
    double c[2][3];
    for (int s = 0; s < 2; ++s) {
      const int64_t off = (l * 2 + s) * H;
      c[s][0] = cosine(ours.data() + off, f32.data() + off);
      c[s][1] = cosine(cpu.data() + off, f32.data() + off);
      c[s][2] = cosine(hf.data() + off, f32.data() + off);
      worst = std::min(worst, c[s][0]);
    }
    std::printf("%5lld  %.6f / %.6f / %.6f    %.6f / %.6f / %.6f\n", (long long)l, c[0][0], c[0][1], c[0][2], c[1][0],
                c[1][1], c[1][2]);
  }
  EXPECT_GE(worst, 0.999) << "our residual stream drifts from the float32 run (table above)";
}

// Long prompts (8,192 and 32,000 tokens, scripts/make_qwen3_06b_reference.py --long): the engine's
// last-token logits against transformers bf16, one prompt at a time, with the default token budget
// (16,384 per step: the 32K prompt is prefilled in two chunks, the second attending to the first
// through the paged cache). Top-1 must agree wherever the reference's margin over its runner-up
// exceeds what bf16 itself moves (transformers bf16 vs float32 on those two logits).
TEST(HFQwen3_06B, LongPromptsMatchTransformers) {
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  ASSERT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  std::ifstream pin(std::string(dir) + "/long_prompts.json");
  ASSERT_TRUE(pin) << "no long_prompts.json: re-run the reference script with --long";
  auto prompts = nlohmann::json::parse(pin)["prompts"].get<std::vector<std::vector<int32_t>>>();
  const int64_t V = model_config(dir).value("vocab_size", int64_t(0)), P = int64_t(prompts.size());
  ASSERT_GT(V, 0);
  auto read = [&](const char* name) {
    std::vector<float> v(size_t(P * V));
    std::ifstream in(std::string(dir) + "/" + name, std::ios::binary);
    EXPECT_TRUE(in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4))) << name;
    return v;
  };
  const auto ref = read("long_ref_logits.f32"), ref32 = read("long_ref_logits_fp32.f32");
  EngineConfig cfg;
  cfg.model = dir;
  cfg.device = DeviceChoice::Cuda;
  cfg.gpu_memory_utilization = 0.5;
  cfg.max_model_len = 32768 + 256;
  LLMEngine e(cfg);
  std::vector<float> got;
  e.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    if (b.seqs.size() == 1 && b.seqs[0]->num_completion_tokens() == 0 &&
        b.seqs[0]->num_cached_tokens + b.seqs[0]->num_scheduled_tokens == b.seqs[0]->num_tokens())
      got.assign(l.begin(), l.begin() + V);
  };
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 1;
  for (int64_t i = 0; i < P; ++i) {
    got.clear();
    e.add_request(prompts[size_t(i)], sp);
    while (e.has_unfinished()) e.step();
    ASSERT_EQ(int64_t(got.size()), V);
    const float* r = ref.data() + i * V;
    const float* r32 = ref32.data() + i * V;
    const LogitsMatch lm = match_logits(r, got.data(), V);
    const int64_t ar = lm.ref_top, ag = lm.got_top;
    int64_t a2 = ar == 0 ? 1 : 0;
    for (int64_t v = 0; v < V; ++v)
      if (v != ar && r[v] > r[a2]) a2 = v;
    const double cos = lm.cosine, margin = r[ar] - r[a2];
    // bf16's own movement of the two logits; without a float32 reference (NaN: the script could not
    // run one at this length), a fixed margin of 0.5 (logits of these weights move ~0.05-0.1).
    double noise = std::fabs(r[ar] - r32[ar]) + std::fabs(r[a2] - r32[a2]);
    if (!std::isfinite(noise)) noise = 0.5;
    std::printf(
        "[gpu] long prompt of %zu tokens: cosine with transformers bf16 %.6f; top-1 ours %lld, reference %lld "
        "(margin %.4f, bf16 noise %.4f)\n",
        prompts[size_t(i)].size(), cos, (long long)ag, (long long)ar, margin, noise);
    EXPECT_GE(cos, 0.999) << prompts[size_t(i)].size() << " tokens";
    if (margin > noise) {
      EXPECT_EQ(ag, ar) << prompts[size_t(i)].size() << " tokens";
    }
  }
}
