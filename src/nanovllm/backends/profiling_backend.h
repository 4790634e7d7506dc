// A Backend decorator that times every op (synchronizing after each, so a time is the op's
// kernels plus one launch) and keeps per-op totals. Used by `nanovllm bench --profile-decode` for
// the per-kernel breakdown of a decode step; it runs eagerly (no CUDA graphs through it).
// GEMMs are named by their (N, K) shape so q/k/v, o, gate/up, down and the LM head separate.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "nanovllm/backends/backend.h"

namespace nanovllm {

class ProfilingBackend final : public Backend {
 public:
  struct Stat {
    int64_t calls = 0;
    double seconds = 0;
  };
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}

  void reset() { stats_.clear(); }
  const std::map<std::string, Stat>& stats() const { return stats_; }

  Device device() const override { return in_->device(); }
  std::string name() const override { return in_->name(); }
  DType act_dtype() const override { return in_->act_dtype(); }
  DType weight_dtype() const override { return in_->weight_dtype(); }
  Tensor empty(const Shape& s, DType t) override { return in_->empty(s, t); }
  void upload(const void* src, DType t, Tensor& dst) override { in_->upload(src, t, dst); }
  void download(const Tensor& src, void* dst) override { in_->download(src, dst); }
  void synchronize() override { in_->synchronize(); }
  void begin_step() override { in_->begin_step(); }
  int64_t free_memory_bytes() override { return in_->free_memory_bytes(); }
  int64_t held_device_bytes() override { return in_->held_device_bytes(); }
  int64_t total_memory_bytes() override { return in_->total_memory_bytes(); }
  int64_t peak_step_bytes() override { return in_->peak_step_bytes(); }
  void prepare_metadata(AttentionMetadata& md) override {
    timed("prepare_metadata", [&] { in_->prepare_metadata(md); });
  }

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) override {
    timed("embedding", [&] { in_->embedding(ids, table, out, vocab_start); });
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    timed("rms_norm", [&] { in_->rms_norm(x, w, eps, out); });
  }
  void add_rms_norm(Tensor& x, Tensor& r, const Tensor& w, float eps) override {
    timed("add_rms_norm", [&] { in_->add_rms_norm(x, r, w, eps); });
  }
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override {
    timed("gemm N=" + std::to_string(w.size(0)) + " K=" + std::to_string(w.size(1)), [&] { in_->linear(x, w, out); });
  }
  void add_bias(Tensor& x, const Tensor& bias) override {
    timed("add_bias", [&] { in_->add_bias(x, bias); });
  }
  void qk_norm_rope(Tensor& qkv, const Tensor& qn, const Tensor& kn, const Tensor& pos, int64_t hq, int64_t hkv,
                    int64_t d, float eps, const RopeParams& rope) override {
    timed("qk_norm_rope", [&] { in_->qk_norm_rope(qkv, qn, kn, pos, hq, hkv, d, eps, rope); });
  }
  void store_kvcache(const Tensor& qkv, Tensor& k, Tensor& v, int64_t hq, int64_t hkv, int64_t d,
                     const AttentionMetadata& md, KVScales kvs = {}) override {
    timed("store_kvcache", [&] { in_->store_kvcache(qkv, k, v, hq, hkv, d, md, kvs); });
  }
  void attention(const Tensor& qkv, const Tensor& k, const Tensor& v, Tensor& out, int64_t hq, int64_t hkv, int64_t d,
                 float scale, const AttentionMetadata& md, int64_t window = 0, KVScales kvs = {},
                 const ReadAhead& then = {}) override {
    timed(md.is_prefill ? "attention_prefill" : "attention_decode",
          [&] { in_->attention(qkv, k, v, out, hq, hkv, d, scale, md, window, kvs, then); });
  }
  void cast(const Tensor& src, Tensor& dst) override {
    timed("cast", [&] { in_->cast(src, dst); });
  }
  void copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) override {
    timed("copy_kv_blocks", [&] { in_->copy_kv_blocks(cache, copies); });
  }
  void silu_and_mul(const Tensor& x, Tensor& out) override {
    timed("silu_and_mul", [&] { in_->silu_and_mul(x, out); });
  }
  void moe_topk(const Tensor& logits, int64_t k, bool renorm, Tensor& weights, Tensor& ids) override {
    timed("moe_topk", [&] { in_->moe_topk(logits, k, renorm, weights, ids); });
  }
  void moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights, const Tensor& ids,
                   Tensor& out) override {
    timed("moe_experts", [&] { in_->moe_experts(x, w13, w2, weights, ids, out); });
  }
  void qk_norm_rope_store(Tensor& qkv, const Tensor& qn, const Tensor& kn, const Tensor& pos, Tensor& k, Tensor& v,
                          int64_t hq, int64_t hkv, int64_t d, float eps, const RopeParams& rope,
                          const AttentionMetadata& md, KVScales kvs = {}) override {
    timed("qk_norm_rope_store",
          [&] { in_->qk_norm_rope_store(qkv, qn, kn, pos, k, v, hq, hkv, d, eps, rope, md, kvs); });
  }
  void linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& s, Tensor& out) override {
    timed(std::string("gemm ") + dtype_name(w.dtype()) + " N=" + std::to_string(w.size(0)) +
              " K=" + std::to_string(w.size(1)),
          [&] { in_->linear_quantized(x, w, s, out); });
  }
  bool supports_quantization(Quantization q) const override { return in_->supports_quantization(q); }
  void quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& s) override {
    in_->quantize_weight(w, q, codes, s);
  }
  void prepare_int_weight(Tensor& codes, WeightScales& s) override { in_->prepare_int_weight(codes, s); }
  void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) override {
    timed("gemm+silu N=" + std::to_string(w.size(0)) + " K=" + std::to_string(w.size(1)),
          [&] { in_->linear_silu_mul(x, w, out); });
  }
  void add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& nw, float eps, const Tensor& w, Tensor& out,
                           bool silu_mul) override {
    timed(std::string(silu_mul ? "add_rms_norm+gemm+silu" : "add_rms_norm+gemm") + " N=" + std::to_string(w.size(0)) +
              " K=" + std::to_string(w.size(1)),
          [&] { in_->add_rms_norm_linear(x, residual, nw, eps, w, out, silu_mul); });
  }
  void add_rms_norm_linear_rope(Tensor& x, Tensor& residual, const Tensor& nw, float eps, const Tensor& w, Tensor& out,
                                const QkNormRopeStore& r) override {
    timed("add_rms_norm_linear_rope N=" + std::to_string(w.size(0)) + " K=" + std::to_string(w.size(1)),
          [&] { in_->add_rms_norm_linear_rope(x, residual, nw, eps, w, out, r); });
  }
  void add_rms_norm_linear_quantized(Tensor& x, Tensor& residual, const Tensor& nw, float eps, const Tensor& w,
                                     const WeightScales& scales, Tensor& out, bool silu_mul) override {
    timed(std::string(silu_mul ? "add_rms_norm+qgemm+silu" : "add_rms_norm+qgemm") + " N=" + std::to_string(w.size(0)) +
              " K=" + std::to_string(w.size(1)),
          [&] { in_->add_rms_norm_linear_quantized(x, residual, nw, eps, w, scales, out, silu_mul); });
  }
  void merge_vocab_shards(const Tensor& parts, Tensor& out) override {
    timed("merge_vocab_shards", [&] { in_->merge_vocab_shards(parts, out); });
  }
  void gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) override {
    timed("gather_rows", [&] { in_->gather_rows(x, rows, out); });
  }
  std::vector<TokenLogprobs> token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens, int n) override {
    std::vector<TokenLogprobs> out;
    timed("token_logprobs", [&] { out = in_->token_logprobs(logits, tokens, n); });
    return out;
  }
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                              std::vector<TokenLogprobs>* logprobs = nullptr) override {
    std::vector<int32_t> out;
    timed("sample", [&] { out = in_->sample(logits, rows, logprobs); });
    return out;
  }
  std::vector<float> to_host_f32(const Tensor& t) override { return in_->to_host_f32(t); }

 private:
  template <class F>
  void timed(const std::string& op, F&& f) {
    in_->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    in_->synchronize();
    Stat& s = stats_[op];
    ++s.calls;
    s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  std::unique_ptr<Backend> in_;
  std::map<std::string, Stat> stats_;
};

}  // namespace nanovllm
