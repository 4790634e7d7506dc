#include "nanovllm/config/quantization.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

Quantization parse_quantization(const std::string& s) {
  if (s.empty() || s == "none" || s == "auto") return Quantization::None;
  if (s == "fp8") return Quantization::FP8;
  if (s == "int8") return Quantization::INT8;
  if (s == "awq" || s == "awq_marlin") return Quantization::AWQ;
  if (s == "gptq" || s == "gptq_marlin") return Quantization::GPTQ;
  if (s == "compressed-tensors") return Quantization::CompressedTensors;
  throw UserError("--quantization " + s +
                  ": not implemented (use none, fp8, int8, awq, gptq or compressed-tensors; awq_marlin and "
                  "gptq_marlin are read as awq and gptq)");
}

IntWeightScheme usual_int_weight_scheme(Quantization q) {
  if (!is_int_weight_only(q))
    throw Error(std::string("usual_int_weight_scheme: ") + quantization_name(q) + " is not an integer-weight format");
  return IntWeightScheme{4, 128, q == Quantization::AWQ};
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
