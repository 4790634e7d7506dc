// Quantization: how linear-layer weights are stored and multiplied (vLLM's --quantization).
//   none  the checkpoint's dtype as loaded (BF16 on CUDA, F32 on the CPU backend); also what an
//         unquantized checkpoint gets with --quantization unset.
//   fp8   FP8 E4M3 weights: a BF16 checkpoint quantized at load (per-output-channel scales,
//         dynamic per-token activation scales, as vLLM's online FP8), or a checkpoint already in
//         FP8 (quantization_config quant_method "fp8", 128 x 128 block scales).
//   int8  INT8 weights with per-block scales and dynamic INT8 activations (llama.cpp's Q8_0 idea;
//         the CPU backend's VNNI path).
//   awq, gptq, compressed-tensors   group-quantized integer weights (W4A16 / W8A16: 4- or 8-bit
//         codes, per-group scales and zero points, activations in the act dtype) read from a
//         checkpoint in that format (backends/int_weights.h is the engine's one representation of
//         all three); with --load-format dummy, random weights quantized at load as the format's
//         usual checkpoints are (4 bits, group 128; awq with zero points, the others symmetric).
//         compressed-tensors' float-quantized (FP8 W8A8) checkpoints run the fp8 scheme.
// A backend that has no kernels for a scheme refuses it at start-up, naming it and the backend.
#pragma once
#include <string>

namespace nanovllm {

enum class Quantization { None, FP8, INT8, AWQ, GPTQ, CompressedTensors };

// Whether q stores group-quantized integer weights (U4/U8 codes, backends/int_weights.h).
inline bool is_int_weight_only(Quantization q) {
  return q == Quantization::AWQ || q == Quantization::GPTQ || q == Quantization::CompressedTensors;
}

// Parses a --quantization value ("none" also spelled "" or "auto"); throws UserError naming it and
// the accepted values (vLLM's other methods, awq, gptq, ..., are named as not implemented).
Quantization parse_quantization(const std::string& s);
// The canonical name: "none", "fp8", "int8", "awq", "gptq" or "compressed-tensors" (vLLM's spellings).
const char* quantization_name(Quantization q);

}  // namespace nanovllm
