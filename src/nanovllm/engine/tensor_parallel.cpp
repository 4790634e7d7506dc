#include "nanovllm/engine/tensor_parallel.h"

#include <algorithm>

#include "nanovllm/config/hf_hub.h"
#include "nanovllm/dist/tp_group.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/tp_protocol.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

RendezvousOptions rendezvous_options(const EngineConfig& cfg) {
  RendezvousOptions o;
  o.master_addr = cfg.master_addr;
  o.master_port = cfg.master_port;
  o.rank = cfg.tp_rank;
  o.world = cfg.tensor_parallel_size;
  o.timeout_s = cfg.tp_connect_timeout_s;
  return o;
}

void check_tensor_parallel(const EngineConfig& cfg, const ModelConfig& mcfg) {
  validate_tensor_parallel(mcfg, cfg.tensor_parallel_size);
  if (cfg.tensor_parallel_size > 1 && resolved_device(cfg.device) == DeviceChoice::Cuda) {
    const int gpus = cuda_device_count();
    if (cfg.ranks_per_node() > gpus)
      throw UserError("--tensor-parallel-size " + std::to_string(cfg.tensor_parallel_size) + " over " +
                      std::to_string(cfg.nnodes) + " node(s) needs " + std::to_string(cfg.ranks_per_node()) +
                      " GPUs per node, but " + std::to_string(gpus) + " are visible");
  }
}

void run_tp_worker(EngineConfig cfg, const std::function<void(const ModelRunner&)>& on_ready) {
  if (cfg.tp_rank <= 0) throw Error("run_tp_worker: rank 0 runs the engine, not a worker");
  settle_model_dir(cfg);
  ModelConfig mcfg = resolve_model_config(cfg);
  check_tensor_parallel(cfg, mcfg);
  TpGroup tp(rendezvous_options(cfg), true);
  apply_settings(tp.receive(), cfg, mcfg);  // rank 0's settings: identical runners on all ranks
  check_tensor_parallel(cfg, mcfg);         // rank 0's device: its GPU count
  tp.start_watchdog(cfg.on_tp_peer_lost);
  ModelRunner runner(cfg, mcfg, make_backend(cfg), &tp);
  if (on_ready) on_ready(runner);
  // On a GPU a decode step takes a few ms and rank 0's GPU waits for this worker in the step's
  // first collective: poll for the next step for 20 ms instead of sleeping (a sleeping thread
  // wakes tens of us late); longer waits (an idle server) sleep. CPU steps need the cores.
  if (resolved_device(cfg.device) == DeviceChoice::Cuda) tp.set_receive_spin(0.02);
  while (true) {
    const auto msg = tp.receive();
    if (msg.empty()) return;  // goodbye
    StepInputs in = decode_step(msg);
    runner.run_worker_step(in);
  }
}

}  // namespace nanovllm
