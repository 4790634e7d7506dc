// The quantization_config of group-quantized integer checkpoints (config.json's, or the
// quantize_config.json AutoGPTQ and AutoAWQ write beside it) -> IntCheckpointFormat
// (config/quantization.h). Accepted, as vLLM reads them:
//   awq                 quant_method "awq", bits (w_bit) 4, group_size (q_group_size) dividing K,
//                       zero_point true, version "gemm", modules_to_not_convert (substrings)
//   gptq                quant_method "gptq", bits 4 or 8, group_size (-1: per row), sym, desc_act,
//                       checkpoint_format (or format) "gptq" (v1: qzeros hold z - 1) or "gptq_v2"
//   compressed-tensors  quant_method "compressed-tensors", format "pack-quantized", config_groups whose
//                       weights are {type int, num_bits 4 or 8, strategy group or channel, symmetric or
//                       not, actorder null, "group" (g_idx tensors) or "weight"} without activation
//                       quantization (W4A16 / W8A16), targets and ignore
// Everything else (AWQ gemv/marlin/exllama packing or zero_point false, 2/3-bit GPTQ, GPTQ's
// quantized lm_head or dynamic per-module rules, compressed-tensors' float-quantized, int-quantized
// and naive-quantized formats, activation or KV-cache quantization, sparsity) is refused by name.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "nanovllm/config/quantization.h"

namespace nanovllm {

// Whether quant_method names an integer-weight format this file parses ("awq", "gptq",
// "compressed-tensors").
bool is_int_quant_method(const std::string& method);

// Parses one of them; throws LoadError naming `where` and the field.
IntCheckpointFormat parse_int_quantization_config(const nlohmann::json& q, const std::string& where);

// quantize_config.json's object (no quant_method: AutoAWQ's when it has w_bit or version, else
// AutoGPTQ's) -> the same.
IntCheckpointFormat parse_quantize_config_file(const nlohmann::json& q, const std::string& where);

}  // namespace nanovllm
