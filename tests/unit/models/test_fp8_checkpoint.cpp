// Qwen's FP8 checkpoints (models/fp8_checkpoint.h) on the CPU backend: the quantization_config
// accepted and refused, codes and 128 x 128 block scales loaded as they are and multiplied weight-
// only (so the engine equals one on the dequantized F32 weights), the engine's scheme from
// --quantization and the checkpoint, packing and tensor-parallel slices on block boundaries.
#include <gtest/gtest.h>

#include "config_test_util.h"
#include "engine_compare.h"
#include "fp8_checkpoint_writer.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/fp8_checkpoint.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

nlohmann::json config_with(const nlohmann::json& qc) {
  nlohmann::json c = test::fp8_fixture_config();
  c["quantization_config"] = qc;
  return c;
}

TEST(Fp8Checkpoint, ConfigAcceptsQwensFormat) {
  EXPECT_EQ(test::parse_config(config_with(test::fp8_quantization_config())).checkpoint_quantization,
            Quantization::FP8);
  nlohmann::json minimal = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};  // FineGrainedFP8Config
  EXPECT_EQ(test::parse_config(config_with(minimal)).checkpoint_quantization, Quantization::FP8);
  minimal["ignored_layers"] = {"lm_head", "model.layers.0.mlp.gate"};  // vLLM's name; a MoE router
  minimal["dequantize"] = false;                                       // transformers' load option
  minimal["modules_to_convert"] = nullptr;                             // transformers 5.17 saves these
  minimal["scale_fmt"] = "float";
  EXPECT_EQ(test::parse_config(config_with(minimal)).checkpoint_quantization, Quantization::FP8);
  EXPECT_EQ(test::parse_config(test::fp8_fixture_config()).checkpoint_quantization, Quantization::None);
}

TEST(Fp8Checkpoint, ConfigRefusesOtherFormatsByName) {
  const nlohmann::json good = test::fp8_quantization_config();
  auto with = [&](const char* key, const nlohmann::json& v) {
    nlohmann::json q = good;
    if (v.is_null())
      q.erase(key);
    else
      q[key] = v;
    return config_with(q);
  };
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {with("quant_method", "compressed-tensors"), "lacks config_groups"},  // models/int_config.h's
      {with("quant_method", "bitsandbytes"), "quant_method 'bitsandbytes'"},
      {with("quant_method", nullptr), "lacks 'quant_method'"},
      {with("fmt", "e5m2"), "fmt 'e5m2'"},
      {with("activation_scheme", "static"), "activation_scheme 'static'"},
      {with("weight_block_size", {64, 64}), "weight_block_size [64,64]"},
      {with("weight_block_size", {128}), "weight_block_size [128]"},
      {with("weight_block_size", nullptr), "per-tensor FP8 checkpoints"},
      {with("modules_to_not_convert", {"model.layers.1.self_attn.q_proj"}), "self_attn.q_proj"},
      {with("modules_to_not_convert", {"model.layers.3.mlp"}), "model.layers.3.mlp"},
      {with("modules_to_not_convert", "lm_head"), "must be a list"},
      {with("kv_cache_scheme", {{"num_bits", 8}}), "'kv_cache_scheme'"},
      {with("dequantize", true), "dequantize true"},
      {with("modules_to_convert", {"q_proj"}), "modules_to_convert [\"q_proj\"]"},
      {with("scale_fmt", "ue8m0"), "scale_fmt 'ue8m0'"},
      {config_with("fp8"), "must be an object"},
  };
  for (const auto& [cfg, want] : cases) {
    const std::string e = test::config_error(cfg);
    EXPECT_NE(e.find("quantization_config"), std::string::npos) << e;
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  }
}

TEST(Fp8Checkpoint, EngineSchemeFromTheFlagAndTheCheckpoint) {
  EXPECT_EQ(resolve_quantization(Quantization::None, Quantization::FP8), Quantization::FP8);
  EXPECT_EQ(resolve_quantization(Quantization::FP8, Quantization::FP8), Quantization::FP8);
  EXPECT_EQ(resolve_quantization(Quantization::FP8, Quantization::None), Quantization::FP8);
  EXPECT_EQ(resolve_quantization(Quantization::None, Quantization::None), Quantization::None);
  try {
    resolve_quantization(Quantization::INT8, Quantization::FP8);
    ADD_FAILURE() << "int8 on an FP8 checkpoint accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--quantization int8: the checkpoint is already fp8"), std::string::npos)
        << e.what();
  }
}

// Packing and tensor parallelism in 128-blocks: offsets and slices that cut a block are refused.
TEST(Fp8Checkpoint, ScaleSpecsFollowBlockBoundaries) {
  Tensor dst;
  WeightSpec k{"model.layers.0.self_attn.k_proj.weight", {1024, 4096}, &dst, 2048};
  WeightSpec s = fp8_scale_spec(k, &dst);
  EXPECT_EQ(s.name, "model.layers.0.self_attn.k_proj.weight_scale_inv");
  EXPECT_EQ(s.shape, (Shape{8, 32}));
  EXPECT_EQ(s.row_offset, 16);
  k.shard_dim = 0, k.num_shards = 8, k.shard_rank = 3, k.row_offset = 4096 / 8;  // TP 8: 128 rows each
  s = fp8_scale_spec(k, &dst);
  EXPECT_EQ(s.local_shape(), (Shape{1, 32}));
  EXPECT_EQ(s.shard_rank, 3);
  EXPECT_EQ(s.row_offset, 4);
  WeightSpec o{"model.layers.0.self_attn.o_proj.weight", {4096, 4096}, &dst};
  o.shard_dim = 1, o.num_shards = 4;
  EXPECT_EQ(fp8_scale_spec(o, &dst).local_shape(), (Shape{32, 8}));
  auto refused = [&](const WeightSpec& w, const std::string& want) {
    try {
      fp8_scale_spec(w, &dst);
      ADD_FAILURE() << w.name << " accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  k.num_shards = 16;  // 64 rows a rank
  refused(k, "'model.layers.0.self_attn.k_proj.weight' [1024, 4096] split in 16 along dimension 0 gives 64");
  o.num_shards = 64;
  refused(o, "split in 64 along dimension 1 gives 64");
  WeightSpec v{"model.layers.0.self_attn.v_proj.weight", {48, 96}, &dst, 144};  // tiny-qwen3's sizes
  refused(v, "packed at row 144");
}

// The FP8 checkpoint's engine computes exactly what an engine on its dequantized F32 weights does
// (weight-only GEMMs over the same values), and stays close to the unquantized random model.
TEST(Fp8Checkpoint, EngineEqualsTheDequantizedModel) {
  test::TempDir d;
  const test::Fp8Checkpoints c = test::write_fp8_checkpoints(d.dir.string());
  for (CpuPrecision precision : {CpuPrecision::Exact, CpuPrecision::Fast}) {
    EngineConfig cfg = test::tiny_cfg(c.fp8);
    cfg.cpu_precision = precision;
    LLMEngine f8(cfg);
    EXPECT_EQ(f8.model_runner().quantization(), Quantization::FP8);
    cfg.model = c.deq;
    cfg.cpu_precision = CpuPrecision::Exact;
    LLMEngine deq(cfg);
    cfg.model = c.f32;
    LLMEngine f32(cfg);
    const test::Agreement same = test::compare_greedy(deq, f8), near = test::compare_greedy(f32, f8);
    const char* p = precision == CpuPrecision::Fast ? "fast" : "exact";
    std::printf("FP8 checkpoint (%s) vs its dequantized F32 weights: %zu/%zu tokens, worst cosine %.8f\n", p, same.same,
                same.total, same.worst_cosine);
    std::printf("FP8 checkpoint (%s) vs the unquantized weights: %zu/%zu tokens, worst cosine %.6f over %zu steps\n", p,
                near.same, near.total, near.worst_cosine, near.compared);
    EXPECT_EQ(same.total, 48u);
    // The fast path keeps norms and embeddings in BF16: close, not bit-near.
    EXPECT_GE(same.worst_cosine, precision == CpuPrecision::Exact ? 0.99999 : 0.999);
    if (precision == CpuPrecision::Exact) EXPECT_EQ(same.same, same.total);
    EXPECT_GE(near.worst_cosine, 0.99);
    EXPECT_LT(near.worst_cosine, 1.0);
  }
  EngineConfig cfg = test::tiny_cfg(c.fp8);
  cfg.quantization = Quantization::FP8;  // the same scheme, named
  EXPECT_NO_THROW(LLMEngine e(cfg));
  cfg.quantization = Quantization::INT8;
  EXPECT_THROW(LLMEngine e(cfg), UserError);
}

TEST(Fp8Checkpoint, LoadErrorsNameTheTensor) {
  test::TempDir d;
  const test::Fp8Checkpoints c = test::write_fp8_checkpoints(d.dir.string());
  auto load_error = [](const std::string& dir) -> std::string {
    try {
      LLMEngine e(test::tiny_cfg(dir));
    } catch (const LoadError& e) {
      return e.what();
    }
    return "";
  };
  // FP8 codes under a config without quantization_config.
  std::filesystem::copy_file(c.f32 + "/config.json", c.fp8 + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(load_error(c.fp8).find("'model.layers.0.self_attn.q_proj.weight' has dtype F8_E4M3 where an unquantized"),
            std::string::npos)
      << load_error(c.fp8);
  // F32 weights under an FP8 config.
  std::ofstream(c.f32 + "/config.json") << config_with(test::fp8_quantization_config()).dump();
  EXPECT_NE(load_error(c.f32).find("'model.layers.0.self_attn.q_proj.weight' has dtype F32 where F8_E4M3 codes"),
            std::string::npos)
      << load_error(c.f32);
}

TEST(Fp8Checkpoint, MissingScalesAreNamed) {
  test::TempDir d;
  const test::Fp8Checkpoints c = test::write_fp8_checkpoints(d.dir.string());
  SafetensorsCheckpoint ck(c.fp8);
  std::map<std::string, test::StTensor> t;
  for (const auto& name : ck.names()) {
    if (name == "model.layers.1.mlp.down_proj.weight_scale_inv") continue;
    const TensorInfo& i = ck.get(name);
    t[name] = {i.dtype == DType::F8E4M3 ? "F8_E4M3" : "F32", i.shape,
               std::string(static_cast<const char*>(i.data), i.nbytes)};
  }
  const std::string dir = d.path("noscale");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(c.fp8 + "/config.json", dir + "/config.json");
  test::write_safetensors(dir + "/model.safetensors", t);
  try {
    LLMEngine e(test::tiny_cfg(dir));
    ADD_FAILURE() << "loaded without a scale";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'model.layers.1.mlp.down_proj.weight_scale_inv'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nanovllm
