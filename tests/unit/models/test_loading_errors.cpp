// Bad model directories and files: every problem is a LoadError/UserError naming what is
// wrong (file, tensor, shape, offset), never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"
#include "test_paths.h"

using namespace nanovllm;
namespace fs = std::filesystem;

namespace {

// A copy of the tied fixture in a temp dir, for corrupting.
struct TempModel : test::TempDir {
  TempModel() {
    for (auto f : {"config.json", "generation_config.json", "model.safetensors"})
      fs::copy_file(test::fixture("tiny-qwen3-tied") + "/" + f, dir / f);
  }
};

std::string load_error(const std::string& dir) {
  EngineConfig cfg;
  cfg.model = dir;
  cfg.device = DeviceChoice::Cpu;
  cfg.kv_cache_memory = 8 << 20;
  try {
    LLMEngine e(cfg);
  } catch (const UserError& err) {
    return err.what();
  }
  return "";
}

void expect_error(const std::string& dir, const std::string& needle) {
  std::string msg = load_error(dir);
  EXPECT_NE(msg.find(needle), std::string::npos) << "message: '" << msg << "' lacks '" << needle << "'";
}

}  // namespace

TEST(LoadingErrors, MissingDirectoryAndConfig) {
  expect_error("/nonexistent/model", "does not exist");
  TempModel m;
  fs::remove(m.dir / "config.json");
  expect_error(m.dir.string(), "missing config.json");
}

TEST(LoadingErrors, UnsupportedArchitectureListsSupported) {
  TempModel m;
  std::string c = m.read("config.json");
  c.replace(c.find("Qwen3ForCausalLM"), 16, "Qwen2MoeForCausalLM");
  m.write("config.json", c);
  expect_error(m.dir.string(),
               "unsupported architecture 'Qwen2MoeForCausalLM'; supported: Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
               "Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM");
}

TEST(LoadingErrors, TruncatedSafetensors) {
  TempModel m;
  std::string s = m.read("model.safetensors");
  m.write("model.safetensors", s.substr(0, s.size() / 2));
  expect_error(m.dir.string(), "outside the data section");
  m.write("model.safetensors", s.substr(0, 5));
  expect_error(m.dir.string(), "truncated");
  m.write("model.safetensors", s.substr(0, 100));
  expect_error(m.dir.string(), "exceeds file size");
}

TEST(LoadingErrors, CorruptHeader) {
  TempModel m;
  std::string s = m.read("model.safetensors");
  s[8] = '#';
  m.write("model.safetensors", s);
  expect_error(m.dir.string(), "not valid JSON at byte offset 8");
}

TEST(LoadingErrors, MissingTensorAndWrongShape) {
  TempModel m;
  std::string c = m.read("config.json");
  // More layers than the checkpoint has: layer 2's tensors are missing.
  c.replace(c.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 3");
  m.write("config.json", c);
  expect_error(m.dir.string(), "missing tensor 'model.layers.2.");
  c.replace(c.find("\"num_hidden_layers\": 3"), 22, "\"num_hidden_layers\": 2");
  c.replace(c.find("\"intermediate_size\": 160"), 24, "\"intermediate_size\": 128");
  m.write("config.json", c);
  expect_error(m.dir.string(), "has shape [160, 64] but the config implies [128, 64]");
}

TEST(LoadingErrors, PresetNeedsDummyFormat) {
  EngineConfig cfg;
  cfg.model = "qwen3-0.6b";
  try {
    LLMEngine e(cfg);
    ADD_FAILURE();
  } catch (const UserError& err) {
    EXPECT_NE(std::string(err.what()).find("--load-format dummy"), std::string::npos);
  }
}

TEST(Safetensors, OverlappingRangesAreRejected) {
  TempModel m;
  // Hand-made file: two tensors sharing bytes.
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string f(8, '\0');
  for (int i = 0; i < 8; ++i) f[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  f += header + std::string(12, '\0');
  m.write("x.safetensors", f);
  try {
    SafetensorsFile sf((m.dir / "x.safetensors").string());
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("overlapping"), std::string::npos) << e.what();
  }
}

// Before: a config.json claiming far bigger sizes than its weights (each size within bounds)
// allocated for them first: 'internal error: out of host memory allocating 1099511627776 bytes'.
// Now a LoadError comparing the two (or, where the allocation succeeds, the first mis-shaped tensor).
TEST(LoadingErrors, ConfigBiggerThanCheckpointIsALoadError) {
  TempModel m;
  std::string c = m.read("config.json");
  c.replace(c.find("\"hidden_size\": 64"), 17, "\"hidden_size\": 524288");
  c.replace(c.find("\"vocab_size\": 512"), 17, "\"vocab_size\": 524288");
  m.write("config.json", c);
  const std::string msg = load_error(m.dir.string());
  EXPECT_TRUE(msg.find("config.json describes a model of 275786498176 parameters, but the checkpoint holds 143808") !=
                  std::string::npos ||
              msg.find("tensor 'model.embed_tokens.weight' has shape [512, 64]") != std::string::npos)
      << msg;
}
