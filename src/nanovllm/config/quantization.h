// Quantization: how linear-layer weights are stored and multiplied (vLLM's --quantization).
//   none  the checkpoint's dtype as loaded (BF16 on CUDA, F32 on the CPU backend); also what an
//         unquantized checkpoint gets with --quantization unset.
//   fp8   FP8 E4M3 weights: a BF16 checkpoint quantized at load (per-output-channel scales,
//         dynamic per-token activation scales, as vLLM's online FP8), or a checkpoint already in
//         FP8 (quantization_config quant_method "fp8", 128 x 128 block scales).
//   int8  INT8 weights with per-block scales and dynamic INT8 activations (llama.cpp's Q8_0 idea;
//         the CPU backend's VNNI path).
// A backend that has no kernels for a scheme refuses it at start-up, naming it and the backend.
#pragma once
#include <string>

namespace nanovllm {

enum class Quantization { None, FP8, INT8 };

// Parses a --quantization value ("none" also spelled "" or "auto"); throws UserError naming it and
// the accepted values (vLLM's other methods, awq, gptq, ..., are named as not implemented).
Quantization parse_quantization(const std::string& s);
// The canonical name: "none", "fp8" or "int8".
const char* quantization_name(Quantization q);

}  // namespace nanovllm
