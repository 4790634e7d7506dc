// Names and parsing of the enum-valued engine settings (engine_choices.h).
#include "nanovllm/config/engine_choices.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

const char* device_choice_name(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::Auto: return "auto";
    case DeviceChoice::Cpu: return "cpu";
    case DeviceChoice::Cuda: return "cuda";
  }
  return "?";
}

DeviceChoice parse_device_choice(const std::string& s, const std::string& flag) {
  for (DeviceChoice d : {DeviceChoice::Cpu, DeviceChoice::Cuda, DeviceChoice::Auto})
    if (s == device_choice_name(d)) return d;
  throw UserError(flag + " must be cpu, cuda or auto (got '" + s + "')");
}

const char* logprobs_mode_name(LogprobsMode m) {
  return m == LogprobsMode::ProcessedLogprobs ? "processed_logprobs" : "raw_logprobs";
}

LogprobsMode parse_logprobs_mode(const std::string& s, const std::string& flag) {
  if (s == "raw_logprobs") return LogprobsMode::RawLogprobs;
  if (s == "processed_logprobs") return LogprobsMode::ProcessedLogprobs;
  throw UserError(flag + " '" + s +
                  "' is not implemented: use raw_logprobs (the default) or processed_logprobs (raw_logits and "
                  "processed_logits are not)");
}

const char* cpu_precision_name(CpuPrecision p) { return p == CpuPrecision::Exact ? "exact" : "fast"; }

CpuPrecision parse_cpu_precision(const std::string& s, const std::string& flag) {
  if (s == "fast") return CpuPrecision::Fast;
  if (s == "exact") return CpuPrecision::Exact;
  throw UserError(flag + " must be fast or exact (got '" + s + "')");
}

const char* scheduling_policy_name(SchedulingPolicy p) { return p == SchedulingPolicy::Priority ? "priority" : "fcfs"; }

SchedulingPolicy parse_scheduling_policy(const std::string& s, const std::string& flag) {
  if (s == "fcfs") return SchedulingPolicy::Fcfs;
  if (s == "priority") return SchedulingPolicy::Priority;
  throw UserError(flag + " must be fcfs or priority (got '" + s + "')");
}

void check_dtype_choice(const std::string& d, DeviceChoice device) {
  const bool bf16 = d == "bfloat16", f32 = d == "float32" || d == "float", f16 = d == "float16" || d == "half";
  if (!(d == "auto" || bf16 || f32 || f16))
    throw UserError("--dtype " + d + ": not a dtype (auto, bfloat16, float16, float32)");
  if (device == DeviceChoice::Auto || d == "auto") return;
  const std::string computes = device == DeviceChoice::Cuda ? "bfloat16" : "float32";
  if (!(device == DeviceChoice::Cuda ? bf16 : f32))
    throw UserError("--dtype " + d + ": the " + device_choice_name(device) + " backend computes in " + computes +
                    " only; use --dtype auto or " + computes);
}

}  // namespace nanovllm
