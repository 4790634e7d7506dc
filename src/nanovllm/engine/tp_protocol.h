// What rank 0 tells the tensor-parallel workers over the control channel (dist/tp_group.h):
//  1. at start-up, the engine settings that shape the ModelRunner (so that every rank warms up,
//     sizes its KV cache, captures graphs and picks kernels (KernelOptions) identically, whatever
//     flags or environment the worker was given), and the model's dimensions, which the worker
//     checks against its own copy of the model;
//  2. before every forward, the step's StepInputs (with the KV-cache copies of prefix hits, which
//     every rank runs on its own shard of the cache);
//  3. at the end, the empty goodbye message (TpGroup::goodbye).
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/engine/model_runner.h"

namespace nanovllm {

std::vector<uint8_t> encode_step(const StepInputs& in);
StepInputs decode_step(const std::vector<uint8_t>& bytes);

std::vector<uint8_t> encode_settings(const EngineConfig& cfg, const ModelConfig& mcfg);
// Adopts rank 0's settings into cfg; throws UserError when the worker's model differs.
void apply_settings(const std::vector<uint8_t>& bytes, EngineConfig& cfg, const ModelConfig& mcfg);

}  // namespace nanovllm
