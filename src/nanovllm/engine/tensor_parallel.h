// Tensor-parallel start-up for the engine, and the worker side of a run.
// Order on every rank (the NCCL side relies on it): rendezvous over TCP -> rank 0 sends its
// settings -> backend on GPU local_rank -> Communicator (NCCL: rank 0 makes the unique id and
// sends it over the control channel) -> weights of the rank's shard -> warm-up forward (GPU:
// collectives) -> KV blocks = min over ranks (control channel) -> CUDA graph capture
// (collectives) -> steps: rank 0 sends each step's inputs, all ranks run the forward.
// Speculative decoding: rank 0 alone loads a draft model (its own backend on rank 0's GPU, no
// collectives) before its ModelRunner, and pays its KV cache (or an EAGLE-3 head's) from its own
// budget: its block count is the smallest, which the all-min gives every rank. Verify steps are
// steps as any other (the drafts travel as input ids of StepInputs).
#pragma once
#include <functional>

#include "nanovllm/config/config.h"
#include "nanovllm/dist/rendezvous.h"

namespace nanovllm {

class ModelRunner;

RendezvousOptions rendezvous_options(const EngineConfig& cfg);

// Refuses, with a UserError naming the numbers, a tensor-parallel size that does not divide the
// model's heads (or intermediate size or vocabulary), and on CUDA more ranks per node than
// visible GPUs. No GPU work: call before starting ranks or backends. cfg is validated already
// (where it was parsed).
void check_tensor_parallel(const EngineConfig& cfg, const ModelConfig& mcfg);

// A worker rank (cfg.tp_rank > 0): joins rank 0, builds its ModelRunner and runs the steps rank 0
// sends until rank 0 says goodbye (returns) or goes away (throws Error). on_ready (tests): sees the
// runner once built (KV cache sized), on this thread, before the first step.
void run_tp_worker(EngineConfig cfg, const std::function<void(const ModelRunner&)>& on_ready = {});

}  // namespace nanovllm
