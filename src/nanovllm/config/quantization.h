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
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm {

enum class Quantization { None, FP8, INT8, AWQ, GPTQ, CompressedTensors };

// Whether q stores group-quantized integer weights (U4/U8 codes, backends/int_weights.h).
inline bool is_int_weight_only(Quantization q) {
  return q == Quantization::AWQ || q == Quantization::GPTQ || q == Quantization::CompressedTensors;
}

// A checkpoint's group-quantized integer format, as its quantization_config says
// (models/int_config.cpp parses it; models/int_checkpoint.cpp reads the tensors it describes).
struct IntCheckpointFormat {
  Quantization method = Quantization::None;  // AWQ, GPTQ or CompressedTensors; None: not such a checkpoint
  int bits = 4;                              // 4 or 8
  int64_t group_size = 128;                  // columns sharing a scale; -1: the whole row (channel-wise)
  bool zero_points = false;                  // asymmetric: the checkpoint stores zero points
  bool gptq_v2 = false;                      // GPTQ: qzeros hold z (gptq_v2), not z - 1 (v1)
  // compressed-tensors float-quantized: F8_E4M3 weights with per-channel weight_scale [N, 1] and
  // dynamic per-token activations, which run the fp8 scheme (the checkpoint's quantization is FP8)
  bool float8 = false;
  // The modules quantized: every linear layer when empty, else those matching one entry (compressed-
  // tensors' targets: "Linear", "re:<regex>" or a module name) ...
  std::vector<std::string> targets;
  // ... and no entry of these (AWQ's modules_to_not_convert: substrings of the module name, as vLLM;
  // compressed-tensors' ignore: "re:<regex>" or a module name). A projection matched here loads
  // unquantized from its "<module>.weight".
  std::vector<std::string> unconverted;
  bool unconverted_substrings = false;  // AWQ's rule (substrings) rather than compressed-tensors' (names)
};

// The usual checkpoints of a format (--load-format dummy, or a BF16 checkpoint with --quantization
// awq|gptq|compressed-tensors, quantizes to these at load): 4 bits in groups of 128 columns, awq with
// zero points, gptq and compressed-tensors symmetric.
struct IntWeightScheme {
  int bits = 4;
  int64_t group_size = 128;
  bool zero_points = false;
};
IntWeightScheme usual_int_weight_scheme(Quantization q);

// Parses a --quantization value ("none" also spelled "" or "auto"; vLLM's awq_marlin and gptq_marlin
// name awq and gptq, whose kernels we choose ourselves); throws UserError naming it and the accepted
// values.
Quantization parse_quantization(const std::string& s);
// The canonical name: "none", "fp8", "int8", "awq", "gptq" or "compressed-tensors" (vLLM's spellings).
const char* quantization_name(Quantization q);

}  // namespace nanovllm
