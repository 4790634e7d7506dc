// Quantize-at-load (models/quantize_weights.h): each projection turns into INT8 codes right after
// the last of its checkpoint tensors is loaded (q, k and v fill qkv_proj: it stays BF16 until v is
// in), never before, so no tensor is written after its layer was quantized; the codes and scales
// equal those of quantizing the whole loaded model afterwards; the LM head waits for finish().
#include <gtest/gtest.h>

#include <cstring>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/config/config.h"
#include "nanovllm/layers/embed_head.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/quantize_weights.h"
#include "test_paths.h"

using namespace nanovllm;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

TEST(WeightQuantizer, QuantizesEachLayerWhenItsLastTensorIsLoaded) {
  const ModelConfig cfg = load_model_config(test::fixture("tiny-qwen3-untied"));
  auto be = make_cpu_backend(2, CpuPrecision::Fast);
  auto model = create_model(cfg, *be);
  auto specs = model->weight_specs();
  WeightQuantizer quantizer(*be, *model, Quantization::INT8, cfg.architecture, specs);
  const std::vector<Linear*> linears = model->quantizable_linears();
  ASSERT_FALSE(linears.empty());
  auto quantized = [&] {
    int64_t n = 0;
    for (Linear* l : linears) n += l->weight.dtype() == DType::I8;
    return n;
  };
  int64_t qkv_parts = 0, completed = 0;
  load_dummy_weights(*be, specs, [&](const WeightSpec& s) {
    EXPECT_NE(s.dst->dtype(), DType::I8) << s.name << " was written after its layer was quantized";
    const bool qkv = s.dst == &linears[0]->weight;  // layer 0's qkv_proj: q, k, v
    quantizer.loaded(s);
    if (qkv) EXPECT_EQ(linears[0]->weight.dtype(), ++qkv_parts < 3 ? DType::BF16 : DType::I8) << s.name;
    for (Linear* l : linears) completed += s.dst == &l->weight && l->weight.dtype() == DType::I8;
    EXPECT_EQ(quantized(), completed) << s.name;
  });
  EXPECT_EQ(qkv_parts, 3);
  EXPECT_EQ(quantized(), int64_t(linears.size()));  // every layer before finish()
  model->finalize_weights();
  ASSERT_NE(model->lm_head(), nullptr);
  EXPECT_EQ(model->lm_head()->weight.dtype(), DType::BF16);
  quantizer.finish();
  EXPECT_EQ(model->lm_head()->weight.dtype(), DType::I8);

  // The same model loaded whole, then quantized: the same codes and scales.
  auto whole = create_model(cfg, *be);
  auto whole_specs = whole->weight_specs();
  load_dummy_weights(*be, whole_specs);
  whole->finalize_weights();
  WeightQuantizer after(*be, *whole, Quantization::INT8, cfg.architecture, {});
  after.finish();
  const std::vector<Linear*> ref = whole->quantizable_linears();
  ASSERT_EQ(ref.size(), linears.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_TRUE(same_bytes(linears[i]->weight, ref[i]->weight)) << "layer " << i;
    EXPECT_TRUE(same_bytes(linears[i]->weight_scales.scale, ref[i]->weight_scales.scale)) << "layer " << i;
  }
  EXPECT_TRUE(same_bytes(model->lm_head()->weight, whole->lm_head()->weight));
}
