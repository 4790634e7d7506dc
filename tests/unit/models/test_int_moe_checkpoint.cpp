// Qwen3-MoE in AWQ, GPTQ and compressed-tensors (models/int_experts.h): tiny MoE checkpoints written
// by the test (tests/int_checkpoint_writer.h, IntSpec::moe) whose engine equals the engine on their
// dequantized F32 weights (act order included); one expert part sliced as tensor parallelism slices
// it (row-parallel with act order and groups cut); the refusals by message (a quantized router, a
// missing expert tensor); --quantization awq|gptq|compressed-tensors on dummy weights
// rounding the experts to the scheme's grid.
#include <gtest/gtest.h>

#include <set>

#include "engine_compare.h"
#include "int_checkpoint_writer.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/int_checkpoint.h"
#include "nanovllm/models/int_config.h"
#include "nanovllm/models/quantize_weights.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

using test::IntFormat;
using test::IntSpec;

IntSpec moe(IntSpec s) {
  s.moe = true;
  return s;
}

std::string engine_error(const EngineConfig& cfg) {
  try {
    LLMEngine e(cfg);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(IntMoeCheckpoint, EngineEqualsTheDequantizedModel) {
  const std::vector<std::pair<IntSpec, const char*>> specs = {
      {moe({IntFormat::AWQ, 4, 64, true}), "awq g64"},
      {moe({IntFormat::GPTQv1, 4, 64, false, true}), "gptq v1 sym desc_act g64"},
      {moe({IntFormat::GPTQv2, 8, -1, true, true}), "gptq v2 8-bit asym per-row desc_act"},
      // targets Linear, ignore lm_head: the router too by the config, but stored unquantized.
      {moe({IntFormat::CT, 4, 128, true, true}), "compressed-tensors W4A16 asym g128 actorder"},
  };
  for (const auto& [spec, what] : specs) {
    test::TempDir d;
    const test::IntCheckpoints c = test::write_int_checkpoints(d.dir.string(), spec);
    LLMEngine q(test::tiny_cfg(c.q)), deq(test::tiny_cfg(c.deq));
    EXPECT_EQ(q.model_config().architecture, "Qwen3MoeForCausalLM");
    EXPECT_TRUE(is_int_weight_only(q.model_runner().quantization())) << what;
    const test::Agreement a = test::compare_greedy(deq, q, 2, 8);
    std::printf("MoE %s vs its dequantized weights: %zu/%zu tokens, worst cosine %.8f\n", what, a.same, a.total,
                a.worst_cosine);
    EXPECT_EQ(a.same, a.total) << what;
    EXPECT_EQ(a.total, 16u) << what;
    EXPECT_GE(a.worst_cosine, 0.99999) << what;
  }
}

// Rewrites the checkpoint's tensors: `drop` left out, `add` added.
void rewrite_tensors(const std::string& dir, const std::string& drop,
                     const std::map<std::string, test::StTensor>& add) {
  std::map<std::string, test::StTensor> t = add;
  {
    SafetensorsCheckpoint ck(dir);
    for (const auto& name : ck.names()) {
      if (name == drop) continue;
      const TensorInfo& i = ck.get(name);
      t[name] = {i.dtype == DType::I32   ? "I32"
                 : i.dtype == DType::I64 ? "I64"
                 : i.dtype == DType::F16 ? "F16"
                                         : "F32",
                 i.shape, std::string(static_cast<const char*>(i.data), i.nbytes)};
    }
  }
  test::write_safetensors(dir + "/model.safetensors", t);
}

TEST(IntMoeCheckpoint, RefusalsNameTheTensor) {
  test::TempDir d;
  IntSpec router = moe({IntFormat::AWQ, 4, 64, true});
  router.quantized_router = true;
  const test::IntCheckpoints r = test::write_int_checkpoints((d.dir / "router").string(), router);
  std::string e = engine_error(test::tiny_cfg(r.q));
  EXPECT_NE(e.find("'model.layers.0.mlp.gate' (the MoE router) is quantized in the awq checkpoint"), std::string::npos)
      << e;
  // A missing expert tensor; an expert stored unquantized where the config quantizes it.
  const test::IntCheckpoints c = test::write_int_checkpoints((d.dir / "gptq").string(), moe({IntFormat::GPTQv2}));
  rewrite_tensors(c.q, "model.layers.0.mlp.experts.3.down_proj.scales", {});
  e = engine_error(test::tiny_cfg(c.q));
  EXPECT_NE(e.find("missing tensor 'model.layers.0.mlp.experts.3.down_proj.scales' (expected shape [2, 256])"),
            std::string::npos)
      << e;
  const test::IntCheckpoints c2 = test::write_int_checkpoints((d.dir / "gptq2").string(), moe({IntFormat::GPTQv2}));
  rewrite_tensors(
      c2.q, "model.layers.0.mlp.experts.6.up_proj.qweight",
      {{"model.layers.0.mlp.experts.6.up_proj.weight", {"F32", {128, 256}, std::string(128 * 256 * 4, '\0')}}});
  e = engine_error(test::tiny_cfg(c2.q));
  EXPECT_NE(e.find("missing tensor 'model.layers.0.mlp.experts.6.up_proj.qweight'"), std::string::npos) << e;
}

// One stacked expert tensor [2 * N, K] as a model: the second expert's part is loaded, sliced.
struct OneExpertModel : CausalLM {
  Linear unused;
  Tensor experts;
  std::vector<WeightSpec> weight_specs() override { return {}; }
  void finalize_weights() override {}
  std::vector<Linear*> quantizable_linears() override { return {&unused}; }
  std::vector<const Tensor*> moe_expert_weights() override { return {&experts}; }
  Tensor forward(const Tensor&, const Tensor&, std::vector<LayerKVCache>&, const AttentionMetadata&,
                 const std::vector<int32_t>*) override {
    return {};
  }
  Tensor compute_logits(const Tensor&, const std::vector<int32_t>&) override { return {}; }
};

TEST(IntMoeCheckpoint, ExpertSlicesAndModulesToNotConvert) {
  // Row-parallel slices that cut groups and have act order (refused for dense layers) and
  // column-parallel ones, each value against the layer's. AWQ's modules_to_not_convert ["gate"]
  // (the router) leaves the experts' gate_proj quantized: matched against "...mlp.experts", as vLLM.
  const std::string e = "model.layers.0.mlp.experts.3.gate_proj";
  for (const IntSpec& s : {IntSpec{IntFormat::GPTQv2, 4, 32, true, true}, IntSpec{IntFormat::CT, 8, 64, false, true},
                           IntSpec{IntFormat::AWQ, 4, 64, true, false, "gate"}}) {
    const int64_t N = 16, K = 128;
    test::TempDir d;
    std::mt19937 rng(5);
    const test::IntLayer layer =
        test::random_int_layer(N, K, s, test::default_g_idx(K, s.group, s.act_order ? &rng : nullptr), rng);
    std::map<std::string, test::StTensor> t;
    test::write_int_layer(layer, s, e, t);
    test::write_safetensors(d.path("model.safetensors"), t);
    SafetensorsCheckpoint ckpt(d.dir.string());
    const IntCheckpointFormat f = parse_int_quantization_config(test::int_quantization_config(s), "test");
    for (auto [dim, rank, shards] :
         {std::tuple{-1, 0, 1}, std::tuple{1, 1, 4}, std::tuple{1, 0, 2}, std::tuple{0, 1, 2}}) {
      CpuBackend be(1);
      OneExpertModel m;
      WeightSpec w{e + ".weight", {N, K}, &m.experts};
      w.shard_dim = dim, w.shard_rank = rank, w.num_shards = shards;
      const Shape local = w.local_shape();
      m.experts = be.empty({2 * local[0], local[1]}, DType::F32);
      w.row_offset = local[0];
      std::vector<WeightSpec> specs{w};
      load_int_checkpoint(be, m, f, "Test", ckpt, specs);
      EXPECT_TRUE(specs.empty());
      const int64_t r0 = dim == 0 ? rank * local[0] : 0, c0 = dim == 1 ? rank * local[1] : 0;
      const float* v = m.experts.data<float>();
      for (int64_t n = 0; n < local[0]; ++n)
        for (int64_t j = 0; j < local[1]; ++j) {
          ASSERT_EQ(v[(local[0] + n) * local[1] + j], layer.value(r0 + n, c0 + j))
              << "dim " << dim << " rank " << rank << " row " << n << " column " << j;
          ASSERT_EQ(v[n * local[1] + j], 0.0f) << "the first expert's rows were written";
        }
    }
  }
  // AWQ's ["mlp.experts"]: all of them unquantized, left to load_weights' "<module>.weight"; refused
  // where the checkpoint holds them quantized.
  IntCheckpointFormat f = parse_int_quantization_config(test::int_quantization_config({}), "test");
  f.unconverted = {"mlp.experts"};
  for (bool quantized : {false, true}) {
    test::TempDir d;
    std::mt19937 rng(5);
    std::map<std::string, test::StTensor> t{{"x", {"F32", {1}, std::string(4, '\0')}}};
    if (quantized)
      test::write_int_layer(test::random_int_layer(8, 64, {}, test::default_g_idx(64, 64, nullptr), rng), {}, e, t);
    test::write_safetensors(d.path("model.safetensors"), t);
    SafetensorsCheckpoint ckpt(d.dir.string());
    CpuBackend be(1);
    OneExpertModel m;
    m.experts = be.empty({8, 64}, DType::F32);
    std::vector<WeightSpec> specs{{e + ".weight", {8, 64}, &m.experts}};
    try {
      load_int_checkpoint(be, m, f, "Test", ckpt, specs);
      EXPECT_FALSE(quantized);
      EXPECT_EQ(specs.size(), 1u);
    } catch (const LoadError& x) {
      EXPECT_TRUE(quantized) << x.what();
      EXPECT_NE(std::string(x.what()).find("'" + e +
                                           "' is quantized in the awq checkpoint, but its quantization_config "
                                           "(targets, ignore or modules_to_not_convert) leaves it unquantized"),
                std::string::npos)
          << x.what();
    }
  }
}

// --load-format dummy --quantization awq|gptq|compressed-tensors: every group of an expert's rows
// holds at most 16 values (4-bit codes) once loaded (the engine: test_cpu_int_linear.cpp).
TEST(IntMoeCheckpoint, DummyExpertsRoundedToTheScheme) {
  const ModelConfig cfg = load_model_config(test::fixture("tiny-qwen3-moe"));
  for (Quantization q : {Quantization::AWQ, Quantization::GPTQ, Quantization::CompressedTensors}) {
    auto be = make_cpu_backend(1, CpuPrecision::Exact);
    auto model = create_model(cfg, *be);
    auto specs = model->weight_specs();
    WeightQuantizer quantizer(*be, *model, q, cfg.architecture, specs);
    load_dummy_weights(*be, specs, [&](const WeightSpec& s) { quantizer.loaded(s); });
    model->finalize_weights();
    quantizer.finish();
    const std::vector<const Tensor*> experts = model->moe_expert_weights();
    ASSERT_EQ(experts.size(), 4u);  // w13 and w2 of the two sparse layers
    for (const Tensor* t : experts) {
      const int64_t K = t->size(1), G = K % 128 == 0 ? 128 : K;  // 72 or 40 columns: one group a row
      const float* v = t->data<float>();
      for (int64_t n = 0; n < t->size(0); ++n) {
        std::set<float> values(v + n * K, v + n * K + G);
        ASSERT_LE(values.size(), 16u) << quantization_name(q) << " row " << n;
        ASSERT_GE(values.size(), 4u) << quantization_name(q) << " row " << n << ": not loaded";
      }
    }
  }
}

}  // namespace
}  // namespace nanovllm
