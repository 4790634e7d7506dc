// --quantization int8 has kernels on the CPU backend only (backends/cpu/cpu_int8*): the CUDA engine
// refuses it at start-up with a UserError naming the scheme and the backend.
#include "gpu_test_util.h"

#include <string>

#include "nanovllm/engine/llm_engine.h"
#include "test_paths.h"

using namespace nanovllm;
using namespace nanovllm::test;

TEST(CudaInt8, QuantizationInt8IsRefused) {
  REQUIRE_GPU();
  EngineConfig cfg;
  cfg.model = fixture("tiny-qwen3-untied");
  cfg.device = DeviceChoice::Cuda;
  cfg.gpu_memory_utilization = 0.3;
  cfg.quantization = Quantization::INT8;
  try {
    LLMEngine e(cfg);
    ADD_FAILURE() << "--quantization int8 was accepted on CUDA";
  } catch (const UserError& err) {
    EXPECT_NE(std::string(err.what()).find("--quantization int8: not implemented on the cuda backend"),
              std::string::npos)
        << err.what();
  }
}
