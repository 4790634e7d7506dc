// The tiny AWQ / GPTQ / compressed-tensors checkpoints of tests/fixtures/int-checkpoints (made on
// the GPU machine by `python3 scripts/make_quantized_checkpoint.py --tiny --out
// tests/fixtures/int-checkpoints`: tiny-qwen3-tied and a tiny Llama, every decoder Linear in the
// format's real packing) on the CPU backend against transformers in float32 running the weights
// dequantized from each format's specification (int_checkpoint_readers.py). The CPU backend
// dequantizes exactly ((code - zero) * scale is exact in F32 on both sides), so the logits differ
// only by summation order: max |difference| < 1e-4 as the unquantized fixtures (seen there: 1.3e-5),
// cosine >= 0.9999, greedy tokens equal up to near-ties.
#include <gtest/gtest.h>

#include <filesystem>

#include "int_checkpoint_check.h"

using namespace nanovllm;

namespace {

// scripts/make_quantized_checkpoint.py's TINY_VARIANTS: the source model, then the scheme.
const char* const kFixtures[] = {"qwen3-awq",      "qwen3-gptq-actorder",         "qwen3-gptq8-asym",
                                 "qwen3-ct-w4a16", "qwen3-ct-w8a16-asym-channel", "qwen3-ct-fp8",
                                 "llama-awq",      "llama-gptq-asym-channel",     "llama-ct-w4a16-asym-actorder"};

class IntCheckpointFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(IntCheckpointFixture, CpuMatchesTransformersOnTheDequantizedWeights) {
  const std::string dir = test::fixture(std::string("int-checkpoints/") + GetParam());
  ASSERT_TRUE(std::filesystem::exists(dir + "/ref_tokens.json"))
      << "missing fixture dir " << dir
      << ": run `python3 scripts/make_quantized_checkpoint.py --tiny --out tests/fixtures/int-checkpoints` on the GPU "
         "machine (torch, transformers) and commit its output";
  const test::IntCheckpointResult r = test::check_int_checkpoint(dir, test::tiny_cfg(dir));
  EXPECT_EQ(r.prompts, 5u);
  EXPECT_GE(r.worst_cosine, 0.9999) << dir;
  EXPECT_LT(r.max_abs, 1e-4) << dir;
  EXPECT_GE(r.compared, 20) << dir << ": too few greedy tokens were decisive to compare";
}

INSTANTIATE_TEST_SUITE_P(Formats, IntCheckpointFixture, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
