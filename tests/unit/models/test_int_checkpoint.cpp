// AWQ, GPTQ and compressed-tensors checkpoints (models/int_config.h, int_formats.h, int_checkpoint.h)
// on the CPU backend: the quantization_configs accepted and refused by name, each format's packing
// read back from hand-made words (AWQ's interleave, GPTQ v1's z - 1, compressed-tensors' offset,
// act order), and whole tiny checkpoints written by the test (tests/int_checkpoint_writer.h) whose
// engine equals the engine on their dequantized F32 weights; the load errors name the tensor.
#include <gtest/gtest.h>

#include "config_test_util.h"
#include "engine_compare.h"
#include "int_checkpoint_writer.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/int_weights.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/fp8_checkpoint.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/int_checkpoint.h"
#include "nanovllm/models/int_formats.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

using test::IntFormat;
using test::IntSpec;

nlohmann::json config_with(const nlohmann::json& qc) {
  nlohmann::json c = test::int_fixture_config();
  c["quantization_config"] = qc;
  return c;
}

TEST(IntCheckpointConfig, AcceptsEachFormat) {
  IntCheckpointFormat f = test::parse_config(config_with(test::int_quantization_config({}))).int_checkpoint;
  EXPECT_EQ(f.method, Quantization::AWQ);
  EXPECT_EQ(f.bits, 4);
  EXPECT_EQ(f.group_size, 64);
  EXPECT_TRUE(f.zero_points);
  const ModelConfig g =
      test::parse_config(config_with(test::int_quantization_config({IntFormat::GPTQv2, 8, -1, false, true})));
  EXPECT_EQ(g.checkpoint_quantization, Quantization::GPTQ);
  EXPECT_EQ(g.int_checkpoint.bits, 8);
  EXPECT_EQ(g.int_checkpoint.group_size, -1);
  EXPECT_FALSE(g.int_checkpoint.zero_points);
  EXPECT_TRUE(g.int_checkpoint.gptq_v2);
  f = test::parse_config(config_with(test::int_quantization_config({IntFormat::CT, 4, -1, true}))).int_checkpoint;
  EXPECT_EQ(f.method, Quantization::CompressedTensors);
  EXPECT_EQ(f.group_size, -1);  // channel
  EXPECT_TRUE(f.zero_points);
  EXPECT_EQ(f.targets, std::vector<std::string>{"Linear"});
  EXPECT_EQ(f.unconverted, std::vector<std::string>{"lm_head"});
  // AutoAWQ's own spellings, upper-case GEMM.
  f = test::parse_config(config_with({{"quant_method", "awq"},
                                      {"w_bit", 4},
                                      {"q_group_size", 128},
                                      {"zero_point", true},
                                      {"version", "GEMM"}}))
          .int_checkpoint;
  EXPECT_EQ(f.group_size, 128);
}

TEST(IntCheckpointConfig, RefusesUnsupportedVariantsByName) {
  auto with = [](IntSpec s, const char* key, const nlohmann::json& v) {
    nlohmann::json q = test::int_quantization_config(s);
    q[key] = v;
    return config_with(q);
  };
  const IntSpec awq{}, gptq{IntFormat::GPTQv1, 4, 128, false}, ct{IntFormat::CT, 4, 128, false};
  nlohmann::json float_ct = test::int_quantization_config(ct);
  float_ct["format"] = "float-quantized";
  nlohmann::json w8a8 = test::int_quantization_config(ct);
  w8a8["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}, {"type", "int"}};
  nlohmann::json tensor_ct = test::int_quantization_config(ct);
  tensor_ct["config_groups"]["group_0"]["weights"]["strategy"] = "tensor";
  nlohmann::json two_bit_ct = test::int_quantization_config(ct);
  two_bit_ct["config_groups"]["group_0"]["weights"]["num_bits"] = 2;
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {with(awq, "version", "gemv"), "version 'gemv'"},
      {with(awq, "version", "marlin"), "version 'marlin'"},
      {with(awq, "bits", 8), "has bits 8: AWQ checkpoints of 4 bits"},
      {with(awq, "zero_point", false), "zero_point false"},
      {with(awq, "group_size", 33), "group_size 33"},
      {with(gptq, "bits", 3), "has bits 3: GPTQ checkpoints of 4 or 8 bits"},
      {with(gptq, "bits", 2), "has bits 2"},
      {with(gptq, "checkpoint_format", "marlin"), "checkpoint_format 'marlin'"},
      {with(gptq, "lm_head", true), "lm_head true"},
      {with(gptq, "dynamic", {{"-:.*down_proj", nlohmann::json::object()}}), "has dynamic"},
      {with(gptq, "group_size", 0), "group_size 0"},
      {with(ct, "format", "naive-quantized"), "format 'naive-quantized'"},
      {with(ct, "format", "int-quantized"), "format 'int-quantized'"},
      {config_with(float_ct), "float-quantized weights of type float, num_bits 8"},
      {config_with(w8a8), "input_activations"},
      {config_with(tensor_ct), "strategy 'tensor'"},
      {config_with(two_bit_ct), "num_bits 2"},
      {with(ct, "kv_cache_scheme", {{"num_bits", 8}}), "kv_cache_scheme"},
      {with(ct, "sparsity_config", {{"format", "sparse-24"}}), "sparsity_config"},
      {with(ct, "config_groups", nlohmann::json::object()), "lacks config_groups"},
      {with(awq, "modules_to_not_convert", "lm_head"), "must be a list"},
      {config_with({{"quant_method", "bitsandbytes"}}), "quant_method 'bitsandbytes'"},
  };
  for (const auto& [cfg, want] : cases) {
    const std::string e = test::config_error(cfg);
    EXPECT_NE(e.find("quantization_config"), std::string::npos) << e;
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  }
}

TEST(IntCheckpointConfig, QuantizeConfigJsonBesideTheConfig) {
  test::TempDir d;
  std::ofstream(d.path("config.json")) << test::int_fixture_config().dump();
  // AutoGPTQ's file: no quant_method.
  std::ofstream(d.path("quantize_config.json"))
      << R"({"bits": 8, "group_size": 64, "desc_act": true, "sym": false, "damp_percent": 0.01})";
  ModelConfig c = load_model_config(d.dir.string());
  EXPECT_EQ(c.checkpoint_quantization, Quantization::GPTQ);
  EXPECT_EQ(c.int_checkpoint.bits, 8);
  EXPECT_TRUE(c.int_checkpoint.zero_points);
  std::ofstream(d.path("quantize_config.json")) << R"({"w_bit": 4, "q_group_size": 32, "zero_point": true,
    "version": "GEMM"})";  // AutoAWQ's
  c = load_model_config(d.dir.string());
  EXPECT_EQ(c.checkpoint_quantization, Quantization::AWQ);
  EXPECT_EQ(c.int_checkpoint.group_size, 32);
  std::ofstream(d.path("quantize_config.json")) << R"({"bits": 3, "group_size": 64})";
  try {
    load_model_config(d.dir.string());
    ADD_FAILURE() << "3-bit accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("quantize_config.json has bits 3"), std::string::npos) << e.what();
  }
}

TEST(IntCheckpointConfig, FlagSpellingsAndConflicts) {
  EXPECT_EQ(parse_quantization("awq"), Quantization::AWQ);
  EXPECT_EQ(parse_quantization("awq_marlin"), Quantization::AWQ);
  EXPECT_EQ(parse_quantization("gptq_marlin"), Quantization::GPTQ);
  EXPECT_EQ(parse_quantization("compressed-tensors"), Quantization::CompressedTensors);
  EXPECT_THROW(parse_quantization("marlin"), UserError);
  EXPECT_EQ(resolve_quantization(Quantization::None, Quantization::GPTQ), Quantization::GPTQ);
  EXPECT_EQ(resolve_quantization(Quantization::AWQ, Quantization::AWQ), Quantization::AWQ);
  try {
    resolve_quantization(Quantization::GPTQ, Quantization::AWQ);
    ADD_FAILURE() << "gptq on an AWQ checkpoint accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--quantization gptq: the checkpoint is already awq"), std::string::npos)
        << e.what();
  }
}

TEST(IntCheckpointConfig, TargetsAndIgnoredModules) {
  IntCheckpointFormat ct;
  ct.targets = {"re:.*self_attn\\..*_proj$"};
  ct.unconverted = {"model.layers.1.self_attn.o_proj", "re:.*k_proj"};
  EXPECT_TRUE(int_format_quantizes(ct, "model.layers.1.self_attn.q_proj"));
  EXPECT_FALSE(int_format_quantizes(ct, "model.layers.1.self_attn.o_proj"));  // ignored by name
  EXPECT_TRUE(int_format_quantizes(ct, "model.layers.0.self_attn.o_proj"));
  EXPECT_FALSE(int_format_quantizes(ct, "model.layers.0.self_attn.k_proj"));  // ignored by regex
  EXPECT_FALSE(int_format_quantizes(ct, "model.layers.0.mlp.up_proj"));       // not targeted
  IntCheckpointFormat awq;
  awq.unconverted = {"down_proj"};
  awq.unconverted_substrings = true;
  EXPECT_FALSE(int_format_quantizes(awq, "model.layers.3.mlp.down_proj"));
  EXPECT_TRUE(int_format_quantizes(awq, "model.layers.3.mlp.up_proj"));
}

// One layer's tensors in a file -> what IntLayerReader reads.
struct OneLayer {
  test::TempDir d;
  std::unique_ptr<SafetensorsCheckpoint> ckpt;
  explicit OneLayer(const std::map<std::string, test::StTensor>& t) {
    test::write_safetensors(d.path("model.safetensors"), t);
    ckpt = std::make_unique<SafetensorsCheckpoint>(d.dir.string());
  }
};

std::string words(std::vector<uint32_t> w) { return test::raw_bytes(w); }
std::string f16s(std::vector<float> v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(test::exact_f16(f));
  return test::raw_bytes(h);
}

TEST(IntCheckpointPacking, AwqInterleavesOutputColumns) {
  // One input row, 8 outputs: nibble i = i, so output 8c + AWQ_ORDER[i] has code i.
  OneLayer one({{"m.qweight", {"I32", {2, 1}, words({0x76543210u, 0x01234567u})}},
                {"m.qzeros", {"I32", {1, 1}, words({0x11111119u})}},
                {"m.scales", {"F16", {1, 8}, f16s({1, 1, 1, 1, 1, 1, 1, 0.5f})}}});
  IntCheckpointFormat f;
  f.method = Quantization::AWQ, f.group_size = 2, f.zero_points = true;
  const IntLayerReader r(f, *one.ckpt, "m", 8, 2);
  std::vector<uint8_t> c(16);
  r.codes(0, 8, 0, 2, c.data());
  const std::vector<uint8_t> want{0, 7, 4, 3, 1, 6, 5, 2, 2, 5, 6, 1, 3, 4, 7, 0};  // [n][k]
  EXPECT_EQ(c, want);
  std::vector<float> z(8), s(8);
  r.zeros(0, 8, 0, 1, z.data());
  EXPECT_EQ(z, (std::vector<float>{9, 1, 1, 1, 1, 1, 1, 1}));  // nibble 0 -> output 0
  r.scales(0, 8, 0, 1, s.data());
  EXPECT_EQ(s[7], 0.5f);
}

TEST(IntCheckpointPacking, GptqPacksAlongInputsAndV1StoresZeroMinusOne) {
  // 8 bits: 4 inputs in a word of each output column; the zeros 4 outputs a word.
  OneLayer one({{"m.qweight", {"I32", {1, 4}, words({0x03020100u, 0x07060504u, 0x0b0a0908u, 0x0f0e0d0cu})}},
                {"m.qzeros", {"I32", {1, 1}, words({0x80070605u})}},
                {"m.scales", {"F16", {1, 4}, f16s({0.25f, 2, 1, 1})}},
                {"m.g_idx", {"I32", {4}, test::raw_bytes(std::vector<int32_t>(4, 0))}}});
  IntCheckpointFormat f;
  f.method = Quantization::GPTQ, f.bits = 8, f.group_size = -1, f.zero_points = true;
  const IntLayerReader r(f, *one.ckpt, "m", 4, 4);
  std::vector<uint8_t> c(16);
  r.codes(0, 4, 0, 4, c.data());
  EXPECT_EQ(c, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));  // [n][k]
  std::vector<float> z(4), s(4);
  r.zeros(0, 4, 0, 1, z.data());
  EXPECT_EQ(z, (std::vector<float>{6, 7, 8, 129}));  // v1: stored + 1
  f.gptq_v2 = true;
  const IntLayerReader v2(f, *one.ckpt, "m", 4, 4);
  v2.zeros(0, 4, 0, 1, z.data());
  EXPECT_EQ(z, (std::vector<float>{5, 6, 7, 128}));
  r.scales(0, 4, 0, 1, s.data());
  EXPECT_EQ(s, (std::vector<float>{0.25f, 2, 1, 1}));
  EXPECT_EQ(r.g_idx(), std::vector<int32_t>(4, 0));
}

TEST(IntCheckpointPacking, CompressedTensorsOffsetsSignedValues) {
  // Signed values -8..7 are stored + 8: the word 0x76543210 holds -8..-1; zero points packed along N.
  OneLayer one({{"m.weight_packed", {"I32", {2, 1}, words({0x76543210u, 0xffffffffu})}},
                {"m.weight_scale", {"F32", {2, 1}, test::raw_bytes(std::vector<float>{0.5f, 1})}},
                {"m.weight_zero_point", {"I32", {1, 1}, words({0x00000093u})}},
                {"m.weight_shape", {"I32", {2}, test::raw_bytes(std::vector<int32_t>{2, 8})}}});
  IntCheckpointFormat f;
  f.method = Quantization::CompressedTensors, f.group_size = -1, f.zero_points = true;
  const IntLayerReader r(f, *one.ckpt, "m", 2, 8);
  std::vector<uint8_t> c(16);
  r.codes(0, 2, 0, 8, c.data());
  for (int k = 0; k < 8; ++k) EXPECT_EQ(c[size_t(k)], k);  // the signed value k - 8, stored as k
  EXPECT_EQ(c[8], 15);                                     // +7
  std::vector<float> z(2);
  r.zeros(0, 2, 0, 1, z.data());
  EXPECT_EQ(z, (std::vector<float>{3, 9}));  // signed -5 and +1
  // weight_shape disagreeing with the config.
  try {
    IntLayerReader bad(f, *one.ckpt, "m", 1, 8);
    ADD_FAILURE() << "accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("'m.weight_packed' has shape [2, 1]"), std::string::npos) << e.what();
  }
}

TEST(IntCheckpointPacking, ActOrderSortsColumnsByGroup) {
  EXPECT_EQ(int_act_order_perm({1, 0, 1, 0}, 2, "t"), (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_TRUE(int_act_order_perm({0, 0, 1, 1}, 2, "t").empty());  // identity: none
  auto refused = [](std::vector<int32_t> g, const std::string& want) {
    try {
      int_act_order_perm(g, 2, "'m.g_idx'");
      ADD_FAILURE() << "accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused({0, 0, 0, 1}, "g_idx gives group 0 3 columns, not group_size 2");
  refused({0, 2, 1, 1}, "g_idx[1] is 2, outside [0, 2)");
}

// The engine on each format's checkpoint computes what the engine on its dequantized F32 weights does.
TEST(IntCheckpoint, EngineEqualsTheDequantizedModel) {
  const std::vector<std::pair<IntSpec, const char*>> specs = {
      // (Other variants: the single-layer loads below and the TP=2 test in unit/dist.)
      {{IntFormat::AWQ, 4, 128, true, false, "mlp.down_proj"}, "awq g128, down_proj unconverted"},
      {{IntFormat::GPTQv1, 4, 64, false, true}, "gptq v1 sym desc_act g64"},
      {{IntFormat::GPTQv2, 8, -1, true, true}, "gptq v2 8-bit asym per-row"},
      {{IntFormat::CT, 4, 64, true, true}, "compressed-tensors W4A16 asym g64 actorder"},
  };
  for (const auto& [spec, what] : specs) {
    test::TempDir d;
    const test::IntCheckpoints c = test::write_int_checkpoints(d.dir.string(), spec);
    LLMEngine q(test::tiny_cfg(c.q)), deq(test::tiny_cfg(c.deq));
    EXPECT_TRUE(is_int_weight_only(q.model_runner().quantization())) << what;
    const test::Agreement a = test::compare_greedy(deq, q, 2, 8);
    std::printf("%s vs its dequantized weights: %zu/%zu tokens, worst cosine %.8f\n", what, a.same, a.total,
                a.worst_cosine);
    EXPECT_EQ(a.same, a.total) << what;
    EXPECT_EQ(a.total, 16u) << what;
    EXPECT_GE(a.worst_cosine, 0.99999) << what;
  }
}

std::string load_error(const EngineConfig& cfg) {
  try {
    LLMEngine e(cfg);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(IntCheckpoint, LoadErrorsNameTheTensor) {
  test::TempDir d;
  const test::IntCheckpoints c = test::write_int_checkpoints(d.dir.string(), {IntFormat::AWQ, 4, 64, true});
  auto rewrite = [&](const nlohmann::json& qc) { std::ofstream(c.q + "/config.json") << config_with(qc).dump(); };
  EngineConfig cfg = test::tiny_cfg(c.q);
  cfg.quantization = Quantization::GPTQ;
  EXPECT_NE(load_error(cfg).find("--quantization gptq: the checkpoint is already awq"), std::string::npos)
      << load_error(cfg);
  cfg.quantization = Quantization::None;
  rewrite(test::int_quantization_config({IntFormat::AWQ, 4, 128, true}));  // tensors are in groups of 64
  EXPECT_NE(load_error(cfg).find("tensor 'model.layers.0.self_attn.q_proj.qzeros' has shape [4, 16] but awq with 4 "
                                 "bits and group 128 implies [2, 16]"),
            std::string::npos)
      << load_error(cfg);
  rewrite(test::int_quantization_config({IntFormat::AWQ, 4, 96, true}));
  EXPECT_NE(load_error(cfg).find("'model.layers.0.self_attn.q_proj' has 256 input columns, not a multiple of "
                                 "group_size 96"),
            std::string::npos)
      << load_error(cfg);
  rewrite(test::int_quantization_config({IntFormat::GPTQv1, 4, 64, true}));  // AWQ tensors under a GPTQ config
  EXPECT_NE(load_error(cfg).find("qweight' has shape [256, 16] but gptq with 4 bits and group 64 implies [32, 128]"),
            std::string::npos)
      << load_error(cfg);
  IntSpec unconverted{IntFormat::AWQ, 4, 64, true};
  unconverted.unconverted = "self_attn.k_proj";  // k alone: q, k, v are one layer here
  rewrite(test::int_quantization_config(unconverted));
  EXPECT_NE(load_error(cfg).find("quantizes 'model.layers.0.self_attn.q_proj' but not "
                                 "'model.layers.0.self_attn.k_proj', which the model packs into one layer"),
            std::string::npos)
      << load_error(cfg);
  unconverted.unconverted = "mlp.down_proj";
  rewrite(test::int_quantization_config(unconverted));
  EXPECT_NE(load_error(cfg).find("'model.layers.0.mlp.down_proj' is left unquantized by the checkpoint's "
                                 "quantization_config (targets, ignore or modules_to_not_convert), but the checkpoint "
                                 "has no 'model.layers.0.mlp.down_proj.weight'"),
            std::string::npos)
      << load_error(cfg);
}

TEST(IntCheckpoint, QuantizedLmHeadIsRefused) {
  test::TempDir d;
  const test::IntCheckpoints c = test::write_int_checkpoints(d.dir.string(), {IntFormat::CT, 4, 64, false});
  // The LM head quantized too (llm-compressor without ignore: lm_head).
  SafetensorsCheckpoint ck(c.q);
  std::map<std::string, test::StTensor> t;
  for (const auto& name : ck.names()) {
    if (name == "lm_head.weight") continue;
    const TensorInfo& i = ck.get(name);
    t[name] = {i.dtype == DType::I32    ? "I32"
               : i.dtype == DType::I64  ? "I64"
               : i.dtype == DType::BF16 ? "BF16"
                                        : "F32",
               i.shape, std::string(static_cast<const char*>(i.data), i.nbytes)};
  }
  t["lm_head.weight_packed"] = {"I32", {320, 32}, std::string(320 * 32 * 4, '\0')};
  test::write_safetensors(c.q + "/model.safetensors", t);
  EXPECT_NE(load_error(test::tiny_cfg(c.q)).find("'lm_head' is quantized in the compressed-tensors checkpoint"),
            std::string::npos)
      << load_error(test::tiny_cfg(c.q));
}

// One linear layer as a model, for the loader's slices (tensor parallelism) and act order.
struct OneLinearModel : CausalLM {
  Linear l;
  std::vector<WeightSpec> specs;
  std::vector<WeightSpec> weight_specs() override { return specs; }
  void finalize_weights() override {}
  std::vector<Linear*> quantizable_linears() override { return {&l}; }
  Tensor forward(const Tensor&, const Tensor&, std::vector<LayerKVCache>&, const AttentionMetadata&,
                 const std::vector<int32_t>*) override {
    return {};
  }
  Tensor compute_logits(const Tensor&, const std::vector<int32_t>&) override { return {}; }
};

struct SlicedLoad {
  test::TempDir d;
  IntSpec spec;
  test::IntLayer layer;
  std::unique_ptr<SafetensorsCheckpoint> ckpt;
  SlicedLoad(IntSpec s, int64_t N, int64_t K) : spec(s) {
    std::mt19937 rng(9);
    layer = test::random_int_layer(N, K, s, test::default_g_idx(K, s.group, s.act_order ? &rng : nullptr), rng);
    std::map<std::string, test::StTensor> t;
    test::write_int_layer(layer, s, "m", t);
    test::write_safetensors(d.path("model.safetensors"), t);
    ckpt = std::make_unique<SafetensorsCheckpoint>(d.dir.string());
  }
  // Loads rank `rank` of `shards` along `dim` (-1: whole) and checks every value against the layer's.
  void load_and_check(int dim, int64_t rank, int64_t shards) {
    CpuBackend be(1);
    OneLinearModel m;
    WeightSpec w{"m.weight", {layer.N, layer.K}, &m.l.weight};
    w.shard_dim = dim, w.shard_rank = rank, w.num_shards = shards;
    const Shape local = w.local_shape();
    m.l.weight = be.empty(local, DType::F32);
    m.specs = {w};
    IntCheckpointFormat f = test::parse_config(config_with(test::int_quantization_config(spec))).int_checkpoint;
    load_int_checkpoint(be, m, f, "Test", *ckpt, m.specs);
    EXPECT_TRUE(m.specs.empty());
    ASSERT_EQ(m.l.weight.shape(), local);
    const int64_t r0 = dim == 0 ? rank * local[0] : 0, c0 = dim == 1 ? rank * local[1] : 0;
    const int32_t* perm = m.l.weight_scales.perm.defined() ? m.l.weight_scales.perm.data<int32_t>() : nullptr;
    EXPECT_EQ(perm != nullptr, spec.act_order);
    std::vector<float> row(static_cast<size_t>(local[1]));
    for (int64_t n = 0; n < local[0]; ++n) {
      int_dequantize_row(m.l.weight, m.l.weight_scales, n, 0, local[1], row.data());
      for (int64_t j = 0; j < local[1]; ++j)
        ASSERT_EQ(row[size_t(j)], layer.value(r0 + n, c0 + (perm ? perm[j] : j))) << "row " << n << " column " << j;
    }
  }
  std::string error(int dim, int64_t rank, int64_t shards) {
    try {
      load_and_check(dim, rank, shards);
    } catch (const LoadError& e) {
      return e.what();
    }
    return "";
  }
};

TEST(IntCheckpoint, TensorParallelSlicesKeepWholeGroups) {
  SlicedLoad gptq({IntFormat::GPTQv1, 4, 32, true}, 16, 192);
  gptq.load_and_check(-1, 0, 1);
  gptq.load_and_check(0, 1, 2);  // column-parallel: rows 8..15
  gptq.load_and_check(1, 1, 2);  // row-parallel: columns 96..191, three groups
  SlicedLoad awq({IntFormat::AWQ, 4, 128, true}, 16, 256);
  awq.load_and_check(1, 3, 4);  // 64 columns inside one group of 128: one scale a row
  SlicedLoad ct({IntFormat::CT, 8, 64, true}, 16, 192);
  ct.load_and_check(1, 0, 3);
  EXPECT_NE(ct.error(1, 1, 2).find("'m.weight' [16, 192] split in 2 along its input columns gives 96 columns a rank, "
                                   "which cut its groups of 64"),
            std::string::npos)
      << ct.error(1, 1, 2);
}

TEST(IntCheckpoint, ActOrderLoadsPermutedAndRefusesRowParallelSlices) {
  SlicedLoad gptq({IntFormat::GPTQv2, 4, 32, false, true}, 16, 128);
  gptq.load_and_check(-1, 0, 1);
  gptq.load_and_check(0, 0, 2);
  EXPECT_NE(gptq.error(1, 0, 2).find("'m.weight' has act order (g_idx reorders its groups) and is split along its "
                                     "input columns by tensor parallelism: not implemented"),
            std::string::npos)
      << gptq.error(1, 0, 2);
  SlicedLoad ct({IntFormat::CT, 4, 32, true, true}, 8, 64);
  ct.load_and_check(-1, 0, 1);
}

}  // namespace
}  // namespace nanovllm
