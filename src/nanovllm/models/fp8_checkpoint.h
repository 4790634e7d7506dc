// FP8 checkpoints in the fine-grained (block-scaled) format of Qwen's Qwen3-*-FP8, DeepSeek-V3 and
// transformers' FineGrainedFP8Config:
//   config.json "quantization_config": {"quant_method": "fp8", "fmt": "e4m3" (optional),
//     "weight_block_size": [128, 128], "activation_scheme": "dynamic",
//     "modules_to_not_convert" / "ignored_layers": modules kept in BF16 (optional)}
//   every quantized projection: "<name>.weight" F8_E4M3 [N, K] and "<name>.weight_scale_inv" F32
//     [ceil(N / 128), ceil(K / 128)], value = code x scale_inv (a multiplier despite its name).
// The codes and scales load as they are (no dequantization) into Linear::weight and
// WeightScales{block_n 128, block_k 128} (backends/weight_scales.h); packed q/k/v and gate/up parts and
// tensor-parallel slices must fall on 128-row (column) block boundaries, refused otherwise naming the
// tensor. Any other quant_method (awq, gptq, compressed-tensors, bitsandbytes, ...), format, block
// size or activation scheme is refused by name (awq, gptq and compressed-tensors go to models/int_config.h), as is a
// module we would quantize in the ignored list.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "nanovllm/config/quantization.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

class CausalLM;

// config.json's quantization_config -> Quantization::FP8, or AWQ / GPTQ / CompressedTensors with
// `int_format` filled (models/int_config.h); throws LoadError naming `where` and the field otherwise.
Quantization parse_quantization_config(const nlohmann::json& q, const std::string& where,
                                       IntCheckpointFormat& int_format);

// The engine's weight scheme from --quantization and the checkpoint's: a quantized checkpoint runs
// its scheme whether --quantization is none or names it; any other flag with it is refused
// (UserError naming both).
Quantization resolve_quantization(Quantization flag, Quantization checkpoint);

// The weight_scale_inv spec of an FP8 weight spec `w` (its rows/columns and shard in 128-blocks),
// filling `scale`; throws LoadError naming the tensor when its packing offset or its tensor-parallel
// slice cuts a block.
WeightSpec fp8_scale_spec(const WeightSpec& w, Tensor* scale);

// Before load_weights of an FP8 checkpoint: every quantizable linear of the model gets F8E4M3 codes
// and 128 x 128 block scales in place of its weight, and `specs` the scale tensors. Throws UserError
// for an architecture without a quantized path (Qwen3-MoE).
void add_fp8_checkpoint_specs(Backend& be, CausalLM& model, const std::string& architecture,
                              std::vector<WeightSpec>& specs);

// The same for compressed-tensors' float-quantized checkpoints (fmt.float8, models/int_config.h):
// the layers its targets / ignore quantize get F8E4M3 codes and one F32 scale per output channel
// (WeightScales block_n 1, block_k 0: vLLM's per-channel FP8) read from "<module>.weight_scale" [N, 1]
// (F32, BF16 or F16); a mixed packed layer is refused by load_weights' dtype check, naming the tensor.
void add_float8_checkpoint_specs(Backend& be, CausalLM& model, const IntCheckpointFormat& fmt,
                                 const std::string& architecture, std::vector<WeightSpec>& specs);

}  // namespace nanovllm
