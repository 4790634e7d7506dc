// Decode through CUDA graphs (nano-vllm's capture_cudagraph): one graph per batch-size bucket
// (1, 2, 4, 8, 16, 32, ... up to max_num_seqs), recorded once at start-up over static input
// buffers, then replayed for every decode step whose batch fits a bucket: the inputs are copied
// into the static buffers (padded rows write nowhere: slot -1) and the whole forward + LM head
// runs as one launch. Sampling stays outside the graph (it is the step's device->host sync).
// Where the backend's decode kernels change launch shape with the context length
// (Backend::decode_context_breaks: more KV splits for long contexts at small batches), a bucket has
// one graph per context range, and a replay takes the range of its batch's longest context.
#pragma once
#include <map>
#include <vector>

#include "nanovllm/config/config.h"
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
  // Decode logits [B, V] for prepared inputs of B <= max_batch() sequences. device_ids: the input
  // ids on the device ([B] I32, async scheduling's tokens of the step before) instead of in's;
  // already in place when they are input_ids(B).
  Tensor run(const StepInputs& in, const Tensor* device_ids = nullptr);
  // The graphs' static input ids of the first B rows: where the sampler of an async step puts its
  // tokens, so that the step after reads them without a copy.
  Tensor input_ids(int64_t B) const { return ids_.rows(0, B); }
  const std::vector<int64_t>& buckets() const { return buckets_; }
  int64_t num_graphs() const { return int64_t(graph_.size()); }  // captured so far

 private:
  int64_t bucket_for(int64_t b) const;
  // Captures the graph of bucket b for context range `range`, whose longest context is `bound`.
  void capture_one(int64_t b, size_t range, int64_t bound);
  // Host metadata for a bucket, sized for the worst case (max_model_len context) so that any
  // launch geometry derived from host values covers every later replay.
  // `ctx_bound`: the longest context of the graph's range (max_model_len for the last range).
  AttentionMetadata capture_metadata(int64_t bucket, int64_t ctx_bound) const;
  // The range index of a context length among the bucket's breaks.
  size_t range_of(int64_t bucket, int64_t context) const;
  void bind_device_views(AttentionMetadata& md, int64_t bucket);

  Backend& be_;
  CausalLM& model_;
  std::vector<LayerKVCache>& kv_;
  int64_t block_size_, max_model_len_, max_blocks_;
  std::vector<int64_t> buckets_;
  // Static device inputs, sized for the largest bucket: views of one buffer (inputs_).
  Tensor inputs_, ids_, pos_, slot_, ctx_, tables_, cu_q_, cu_k_;
  std::vector<int32_t> host_inputs_;                // reused host image of the inputs
  std::map<int64_t, std::vector<int64_t>> breaks_;  // bucket -> context breaks below max_model_len
  using Key = std::pair<int64_t, size_t>;           // (bucket, context range)
  std::map<Key, int64_t> graph_;                    // -> graph handle
  std::map<Key, Tensor> logits_;                    // -> captured logits [bucket, V]
};

}  // namespace nanovllm
