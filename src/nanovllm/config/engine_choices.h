// The enum-valued engine settings that are not kernel tuning: which device, what logprobs are
// computed from, the CPU backend's arithmetic and the scheduling policy. Parsed once from their
// names (the CLI's and the Python keywords' values) so that the engine compares enums, not strings.
// (C++17: backends/backend.h, which CUDA sources include, includes this.)
#pragma once
#include <string>

namespace nanovllm {

// --device: Auto is cuda when a GPU is present (backends/backend.h: resolved_device).
enum class DeviceChoice { Auto, Cpu, Cuda };

// --logprobs-mode (vLLM's): from the model's logits, or after penalties, logit_bias, min_tokens and
// temperature. vLLM's raw_logits and processed_logits are not implemented.
enum class LogprobsMode { RawLogprobs, ProcessedLogprobs };

// --cpu-precision: the CPU backend's arithmetic (backends/cpu/cpu_backend.h). Exact: FP32 weights,
// OpenBLAS sgemm, the oracle of the CUDA kernels and of the Hugging Face fixture tests. Fast:
// weights kept in BF16 (half the bytes a decode step reads), GEMV/GEMM kernels that widen them to
// FP32 and accumulate in FP32 (AVX-512 / AVX2 / portable, chosen at run time by the CPU's features).
enum class CpuPrecision { Fast, Exact };

// --scheduling-policy (vLLM's): first come, first served, or by each request's `priority` (lower
// first, then arrival; the scheduler preempts lower-priority streams first).
enum class SchedulingPolicy { Fcfs, Priority };

// Names as the CLI spells them; parse_* throw UserError naming `flag` and the accepted values.
const char* device_choice_name(DeviceChoice d);
DeviceChoice parse_device_choice(const std::string& s, const std::string& flag = "--device");
const char* logprobs_mode_name(LogprobsMode m);
LogprobsMode parse_logprobs_mode(const std::string& s, const std::string& flag = "--logprobs-mode");
const char* cpu_precision_name(CpuPrecision p);
CpuPrecision parse_cpu_precision(const std::string& s, const std::string& flag = "--cpu-precision");
const char* scheduling_policy_name(SchedulingPolicy p);
// --dtype (vLLM's names: auto, bfloat16, float16 / half, float32 / float): "auto" or the dtype the
// resolved `device`'s backend computes in (bfloat16 on cuda, float32 on cpu); with device Auto only
// the name is checked. Throws UserError naming --dtype (the CLI and the Python keyword share it).
void check_dtype_choice(const std::string& dtype, DeviceChoice device);
SchedulingPolicy parse_scheduling_policy(const std::string& s, const std::string& flag = "--scheduling-policy");

}  // namespace nanovllm
