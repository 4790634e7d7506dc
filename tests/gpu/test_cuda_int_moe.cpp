// Qwen3-MoE in AWQ / GPTQ / compressed-tensors on CUDA (models/int_experts.h): tiny MoE checkpoints
// written by the test (tests/int_checkpoint_writer.h) run with the attention projections on the
// INT4/INT8 kernels and the experts dequantized at load into the BF16 expert tensors of the fused MoE
// kernels (the writer's values are exact in BF16), against the CPU backend's exact reference on the
// same checkpoint: the logits differ by BF16 activation rounding (the bound of
// test_cuda_int_weights.cpp's engine comparison, 0.995), except at a token whose router
// probabilities of the k-th and (k+1)-th expert lie within that rounding of each other: it may take
// the other expert (test_cuda_moe.cpp), which moves its logits further (H200, 2026-11-29: one step
// at cosine 0.937 in 79 on the AWQ checkpoint; all others >= 0.995). So: nearly every step within
// the rounding bound, none far off, and the greedy tokens compared up to the first divergence.
#include <algorithm>

#include "engine_compare.h"
#include "gpu_test_util.h"
#include "int_checkpoint_writer.h"
#include "temp_dir.h"

using namespace nanovllm;

namespace {

TEST(CudaIntMoe, CheckpointsAgainstTheCpu) {
  REQUIRE_GPU();
  using test::IntFormat;
  for (test::IntSpec s :
       {test::IntSpec{IntFormat::AWQ, 4, 128, true}, test::IntSpec{IntFormat::GPTQv1, 4, 64, false, true},
        test::IntSpec{IntFormat::CT, 8, -1, true}}) {
    s.moe = true;
    test::TempDir d;
    const test::IntCheckpoints c = test::write_int_checkpoints(d.dir.string(), s);
    EngineConfig cfg = test::tiny_cfg(c.q);
    LLMEngine cpu(cfg);
    cfg.device = DeviceChoice::Cuda;
    cfg.kv_cache_memory = 64 << 20;
    LLMEngine gpu(cfg);
    EXPECT_TRUE(is_int_weight_only(gpu.model_runner().quantization()));
    const test::Agreement g = test::compare_greedy(cpu, gpu, 6, 16);
    std::printf("[gpu] MoE %s %d-bit: cuda vs cpu: %zu/%zu greedy tokens, worst logits cosine %.6f over %zu steps\n",
                quantization_name(gpu.model_runner().quantization()), s.bits, g.same, g.total, g.worst_cosine,
                g.compared);
    EXPECT_EQ(g.total, 96u);
    const auto off = std::count_if(g.cosines.begin(), g.cosines.end(), [](double c) { return c < 0.995; });
    EXPECT_LE(off * 20, static_cast<long>(g.compared)) << off << " steps below cosine 0.995";  // <= 5%
    EXPECT_GE(g.worst_cosine, 0.9);
    EXPECT_GE(g.compared, 12u);
  }
}

}  // namespace
