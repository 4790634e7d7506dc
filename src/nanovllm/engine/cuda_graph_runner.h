// Decode through CUDA graphs (nano-vllm's capture_cudagraph): one graph per batch-size bucket
// (1, 2, 4, 8, 16, 32, ... up to max_num_seqs), recorded once at start-up over static input
// buffers, then replayed for every decode step whose batch fits a bucket: the inputs are copied
// into the static buffers (padded rows write nowhere: slot -1) and the whole forward + LM head
// runs as one launch. Sampling stays outside the graph (it is the step's device->host sync).
#pragma once
#include <map>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/layers/attention.h"
#include "nanovllm/models/causal_lm.h"

namespace nanovllm {

class CudaGraphRunner {
 public:
  CudaGraphRunner(Backend& be, CausalLM& model, std::vector<LayerKVCache>& kv, const EngineConfig& cfg);
  ~CudaGraphRunner();  // destroys the graphs (before the model runner's communicator goes)
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;
  void capture();
  int64_t max_batch() const { return buckets_.empty() ? 0 : buckets_.back(); }
  // Decode logits [B, V] for prepared inputs of B <= max_batch() sequences.
  Tensor run(const StepInputs& in);
  const std::vector<int64_t>& buckets() const { return buckets_; }

 private:
  int64_t bucket_for(int64_t b) const;
  // Host metadata for a bucket, sized for the worst case (max_model_len context) so that any
  // launch geometry derived from host values covers every later replay.
  AttentionMetadata capture_metadata(int64_t bucket) const;
  void bind_device_views(AttentionMetadata& md, int64_t bucket);

  Backend& be_;
  CausalLM& model_;
  std::vector<LayerKVCache>& kv_;
  int64_t block_size_, max_model_len_, max_blocks_;
  std::vector<int64_t> buckets_;
  // Static device inputs, sized for the largest bucket: views of one buffer (inputs_).
  Tensor inputs_, ids_, pos_, slot_, ctx_, tables_, cu_q_, cu_k_;
  std::vector<int32_t> host_inputs_, host_tables_;  // reused host images of the inputs
  std::map<int64_t, int64_t> graph_;                // bucket -> graph handle
  std::map<int64_t, Tensor> logits_;                // bucket -> captured logits [bucket, V]
};

}  // namespace nanovllm
