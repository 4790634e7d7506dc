#include "nanovllm/config/quantization.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

Quantization parse_quantization(const std::string& s) {
  if (s.empty() || s == "none" || s == "auto") return Quantization::None;
  if (s == "fp8") return Quantization::FP8;
  if (s == "int8") return Quantization::INT8;
  throw UserError("--quantization " + s + ": not implemented (use none, fp8 or int8)");
}

const char* quantization_name(Quantization q) {
  switch (q) {
    case Quantization::None: return "none";
    case Quantization::FP8: return "fp8";
    case Quantization::INT8: return "int8";
    case Quantization::AWQ: return "awq";
    case Quantization::GPTQ: return "gptq";
    case Quantization::CompressedTensors: return "compressed-tensors";
  }
  return "?";
}

}  // namespace nanovllm
