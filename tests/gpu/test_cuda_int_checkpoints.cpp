// AWQ, GPTQ and compressed-tensors checkpoints in their real packing (scripts/make_quantized_checkpoint.py
// from the Qwen3-0.6B-size random model; scripts/gpu_session.sh makes one per scheme and lists them in
// NANOVLLM_INT_CKPT_DIRS, separated by ':') on CUDA against transformers in BF16 running the same
// weights dequantized from each format's specification: last-token logits cosine >= 0.999 on every
// prompt (the bound), greedy tokens equal up to near-ties (near_tie.h: a step whose margin
// is within 0.05, within what float32 moves the reference's two logits, or within twice the largest
// logit difference the prompt's first step measured is not held: int_checkpoint_check.h). The CPU
// backend runs the first prompts of the checkpoints up to Qwen3-0.6B's hidden size as well (its F32
// against the BF16 reference: the same bounds).
#include <cstdlib>
#include <sstream>

#include "gpu_test_util.h"
#include "int_checkpoint_check.h"

using namespace nanovllm;

namespace {

std::vector<std::string> int_checkpoint_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("NANOVLLM_INT_CKPT_DIRS")) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  return dirs;
}

#define REQUIRE_INT_CHECKPOINTS(dirs)                                                                       \
  do {                                                                                                      \
    if ((dirs).empty())                                                                                     \
      GTEST_SKIP() << "needs NANOVLLM_INT_CKPT_DIRS (scripts/make_quantized_checkpoint.py --src DIR --out " \
                      "OUT --format ...; scripts/gpu_session.sh makes them)";                               \
  } while (0)

void expect_near_reference(const std::string& dir, const test::IntCheckpointResult& r, size_t prompts) {
  EXPECT_EQ(r.prompts, prompts) << dir;
  EXPECT_GE(r.worst_cosine, 0.999) << dir;
  EXPECT_GT(r.compared, 0) << dir << ": no greedy token was decisive";
}

TEST(IntCheckpointsFromTransformers, CudaMatchesTheDequantizedModel) {
  REQUIRE_GPU();
  const auto dirs = int_checkpoint_dirs();
  REQUIRE_INT_CHECKPOINTS(dirs);
  for (const std::string& dir : dirs) {
    EngineConfig cfg;
    cfg.device = DeviceChoice::Cuda;
    cfg.gpu_memory_utilization = 0.3;
    // The reference is weight-only: compressed-tensors' FP8 W8A8 runs here without quantizing the
    // prompts' activations (the FP8 GEMM's per-token scales move the logits to cosine ~0.98-0.99:
    // test_cuda_fp8_weights.cpp); the integer formats do not quantize activations at all.
    cfg.kernels.fp8_gemm = Fp8Gemm::Dequantize;
    const size_t prompts = test::read_json(dir + "/prompts.json")["prompts"].size();
    expect_near_reference(dir, test::check_int_checkpoint(dir, cfg), prompts);
  }
}

TEST(IntCheckpointsFromTransformers, CpuBackendOnTheSmallerOnes) {
  REQUIRE_GPU();  // runs where the checkpoints are made
  const auto dirs = int_checkpoint_dirs();
  REQUIRE_INT_CHECKPOINTS(dirs);
  constexpr size_t kPrompts = 3, kTokens = 4;
  size_t run = 0;
  for (const std::string& dir : dirs) {
    if (test::read_json(dir + "/config.json").value("hidden_size", int64_t(0)) > 1024) continue;
    EngineConfig cfg;
    cfg.device = DeviceChoice::Cpu;
    cfg.kv_cache_memory = int64_t(256) << 20;
    expect_near_reference(dir, test::check_int_checkpoint(dir, cfg, kPrompts, kTokens), kPrompts);
    ++run;
  }
  EXPECT_GT(run, 0u) << "no checkpoint of NANOVLLM_INT_CKPT_DIRS is small enough for the CPU backend";
}

}  // namespace
