// Tensor parallelism in one process, for the tests: rank 0's LLMEngine in the calling thread, the
// workers (run_tp_worker) in threads of their own (the CPU communicator, or NCCL on CUDA). tp 1:
// the engine alone.
#pragma once
#include <functional>
#include <future>
#include <vector>

#include "nanovllm/dist/socket.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/tensor_parallel.h"

namespace nanovllm::test {

// Builds the ranks of cfg at size tp (a free port picked), runs body on rank 0's engine, then ends
// the workers (the engine's goodbye) and waits for them. Returns every rank's KV blocks (index:
// rank), each read where that rank built its runner (a worker's in its thread, read here after
// it ended).
inline std::vector<int64_t> run_tp_engine(EngineConfig cfg, int tp, const std::function<void(LLMEngine&)>& body) {
  cfg.tensor_parallel_size = tp;
  cfg.master_port = tp > 1 ? pick_free_port("127.0.0.1") : 0;
  std::vector<int64_t> blocks(size_t(tp), 0);
  std::vector<std::future<void>> workers;
  for (int r = 1; r < tp; ++r) {
    EngineConfig w = cfg;
    w.tp_rank = r;
    w.max_num_seqs = 1;  // ignored: workers adopt rank 0's settings
    int64_t* mine = &blocks[size_t(r)];
    workers.push_back(std::async(std::launch::async, [w, mine] {
      run_tp_worker(w, [mine](const ModelRunner& runner) { *mine = runner.num_kv_blocks(); });
    }));
  }
  {
    LLMEngine e(cfg);
    blocks[0] = e.model_runner().num_kv_blocks();
    body(e);
  }  // goodbye: the workers return
  for (auto& w : workers) w.get();
  return blocks;
}

}  // namespace nanovllm::test
