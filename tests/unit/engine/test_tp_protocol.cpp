// The tensor-parallel settings message (engine/tp_protocol.h): rank 0's engine settings and kernel
// options arrive intact on a worker and replace the worker's own, whatever they were.
#include <gtest/gtest.h>

#include <string>

#include "nanovllm/config/config.h"
#include "nanovllm/engine/tp_protocol.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "settings_samples.h"

using namespace nanovllm;

namespace {

ModelConfig model() {
  auto m = preset_model_config("qwen3-0.6b");
  EXPECT_TRUE(m.has_value());
  return *m;
}

TEST(TpProtocol, SettingsCarryRankZerosKernelOptions) {
  EngineConfig rank0;
  rank0.max_num_seqs = 7;
  rank0.enforce_eager = true;
  rank0.kernels.pdl = false;
  rank0.kernels.gemv_norm = GemvNormFusion::Always;
  rank0.kernels.max_decode_splits = 3;
  rank0.kernels.decode_cluster = true;
  rank0.kernels.decode_warps = 4;
  rank0.kernels.decode_read_ahead = false;
  rank0.kernels.p2p_all_reduce = false;
  rank0.kernels.all_reduce_norm = false;
  rank0.kernels.prefill_attention = PrefillAttention::Wgmma;
  const auto bytes = encode_settings(rank0, model());

  // A worker whose own options (from its environment or flags) differ in every field.
  EngineConfig worker;
  worker.tp_rank = 1;
  worker.kernels.max_decode_splits = 9;
  worker.kernels.prefill_attention = PrefillAttention::Tiled;
  apply_settings(bytes, worker, model());
  EXPECT_EQ(worker.kernels, rank0.kernels) << worker.kernels.to_string() << " vs " << rank0.kernels.to_string();
  EXPECT_EQ(worker.max_num_seqs, 7);
  EXPECT_TRUE(worker.enforce_eager);
  EXPECT_EQ(worker.tp_rank, 1);  // not a setting

  // Rank 0 with the defaults resets a worker's non-default options to the defaults.
  const auto defaults = encode_settings(EngineConfig(), model());
  apply_settings(defaults, worker, model());
  EXPECT_EQ(worker.kernels, KernelOptions());
}

// The wire is the settings table's: every setting marked `travels` arrives, the others keep the
// worker's own values.
TEST(TpProtocol, SettingsMarkedTravellingArriveAndNoOthers) {
  EngineConfig rank0;
  for (const Setting& s : engine_settings()) set_setting_text(s, rank0, test::other_value_text(s));
  EngineConfig worker;
  worker.tp_rank = 1;
  apply_settings(encode_settings(rank0, model()), worker, model());
  const EngineConfig defaults;
  for (const Setting& s : engine_settings())
    EXPECT_EQ(setting_text(s.get(worker)), setting_text(s.get(s.travels ? rank0 : defaults))) << s.name;
}

TEST(TpProtocol, BadKernelOptionsFromRankZeroAreAnError) {
  std::string text;
  {
    const auto bytes = encode_settings(EngineConfig(), model());
    text.assign(bytes.begin(), bytes.end());
  }
  const std::string good = "max_decode_splits=16";
  const size_t at = text.find(good);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, good.size(), "max_decode_splits=99");
  EngineConfig worker;
  try {
    apply_settings(std::vector<uint8_t>(text.begin(), text.end()), worker, model());
    ADD_FAILURE() << "accepted " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor parallel: rank 0's kernel options"), std::string::npos) << e.what();
  }
}

// A step's KV-cache copies (prefix caching's granule hits) reach the workers with its inputs; a
// message cut inside them is an error, not a short list.
TEST(TpProtocol, StepCarriesItsKvCopies) {
  StepInputs in;
  in.input_ids = {5, 6, 7};
  in.positions = {32, 33, 34};
  in.last_rows = {2};
  in.md.is_prefill = true;
  in.md.num_seqs = 1;
  in.md.slot_mapping = {96, 97, 98};
  in.kv_copies = {{4, 3, 32}, {4, 9, 16}};
  const auto bytes = encode_step(in);
  const StepInputs out = decode_step(bytes);
  EXPECT_EQ(out.input_ids, in.input_ids);
  EXPECT_EQ(out.md.slot_mapping, in.md.slot_mapping);
  ASSERT_EQ(out.kv_copies.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out.kv_copies[i].src_block, in.kv_copies[i].src_block);
    EXPECT_EQ(out.kv_copies[i].dst_block, in.kv_copies[i].dst_block);
    EXPECT_EQ(out.kv_copies[i].num_slots, in.kv_copies[i].num_slots);
  }
  EXPECT_THROW(decode_step({bytes.begin(), bytes.end() - 4}), Error);
  in.kv_copies.clear();
  EXPECT_TRUE(decode_step(encode_step(in)).kv_copies.empty());
}

}  // namespace
