#include "nanovllm/engine/cuda_graph_runner.h"

#include <algorithm>
#include <cstdio>

#include "nanovllm/utils/error.h"

namespace nanovllm {

CudaGraphRunner::CudaGraphRunner(Backend& be, CausalLM& model, std::vector<LayerKVCache>& kv, const EngineConfig& cfg)
    : be_(be), model_(model), kv_(kv), block_size_(cfg.block_size), max_model_len_(cfg.max_model_len) {
  max_blocks_ = (max_model_len_ + block_size_ - 1) / block_size_;
  const int64_t max_bs = std::min<int64_t>(cfg.max_num_seqs, 512);
  for (int64_t b : {1, 2, 4, 8})
    if (b < max_bs) buckets_.push_back(b);
  for (int64_t b = 16; b < max_bs; b += 16) buckets_.push_back(b);
  buckets_.push_back(max_bs);
  for (int64_t b : buckets_)
    for (int64_t c : be_.decode_context_breaks(b))
      if (c > 1 && c <= max_model_len_) breaks_[b].push_back(c);
  // One static I32 buffer holds every input, so a replay needs one host->device copy:
  // [ids n | positions n | slots n | context lens n | cu_seqlens_k n+1 | cu_seqlens_q n+1 | block tables n*max_blocks]
  const int64_t n = buckets_.back();
  inputs_ = be_.empty({6 * n + 2 + n * max_blocks_}, DType::I32);
  auto part = [&](int64_t& at, int64_t len) {
    Tensor t = inputs_.rows(at, at + len);
    at += len;
    return t;
  };
  int64_t at = 0;
  ids_ = part(at, n);
  pos_ = part(at, n);
  slot_ = part(at, n);
  ctx_ = part(at, n);
  cu_k_ = part(at, n + 1);
  cu_q_ = part(at, n + 1);
  tables_ = part(at, n * max_blocks_);
}

int64_t CudaGraphRunner::bucket_for(int64_t b) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), b);
  if (it == buckets_.end()) throw Error("cuda graphs: batch of " + std::to_string(b) + " exceeds the largest bucket");
  return *it;
}

CudaGraphRunner::~CudaGraphRunner() {
  try {
    be_.synchronize();
    for (auto& [key, h] : graph_) be_.graph_destroy(h);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: destroying CUDA graphs: %s\n", e.what());
  }
}

size_t CudaGraphRunner::range_of(int64_t bucket, int64_t context) const {
  auto it = breaks_.find(bucket);
  if (it == breaks_.end()) return 0;
  return size_t(std::upper_bound(it->second.begin(), it->second.end(), context) - it->second.begin());
}

AttentionMetadata CudaGraphRunner::capture_metadata(int64_t bucket, int64_t ctx_bound) const {
  AttentionMetadata md;
  md.is_prefill = false;
  md.num_seqs = md.num_tokens = bucket;
  md.max_seqlen_q = 1;
  md.max_seqlen_k = int32_t(ctx_bound);
  md.max_blocks = max_blocks_;
  for (int64_t i = 0; i <= bucket; ++i) {
    md.cu_seqlens_q.push_back(int32_t(i));
    md.cu_seqlens_k.push_back(int32_t(i * ctx_bound));
  }
  md.slot_mapping.assign(size_t(bucket), -1);
  md.context_lens.assign(size_t(bucket), int32_t(ctx_bound));
  md.block_tables.assign(size_t(bucket * max_blocks_), 0);
  return md;
}

void CudaGraphRunner::bind_device_views(AttentionMetadata& md, int64_t bucket) {
  md.d_cu_seqlens_q = cu_q_.rows(0, bucket + 1);
  md.d_cu_seqlens_k = cu_k_.rows(0, bucket + 1);
  md.d_slot_mapping = slot_.rows(0, bucket);
  md.d_context_lens = ctx_.rows(0, bucket);
  md.d_block_tables = tables_.rows(0, bucket * max_blocks_);
}

void CudaGraphRunner::capture() {
  // Largest first: its activations bound every smaller bucket's in the step arena.
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
    const int64_t b = *it;
    // The bucket's context ranges, the last (longest contexts) first; each is captured with its
    // longest context, so every launch shape the plan derives covers the range.
    const auto br = breaks_.find(b);
    const std::vector<int64_t> breaks = br == breaks_.end() ? std::vector<int64_t>{} : br->second;
    for (size_t r = breaks.size() + 1; r-- > 0;) {
      const int64_t bound = r < breaks.size() ? breaks[r] - 1 : max_model_len_;
      capture_one(b, r, bound);
    }
  }
  be_.synchronize();
}

void CudaGraphRunner::capture_one(int64_t b, size_t range, int64_t bound) {
  std::vector<int32_t> arange(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) arange[size_t(i)] = int32_t(i);
  // Safe inputs for the capture's own (recorded, not run) kernels and the warm-up run:
  // context 1 reading block 0, slot -1 writing nothing.
  StepInputs in;
  in.md = capture_metadata(b, bound);
  in.input_ids.assign(size_t(b), 0);
  in.positions.assign(size_t(b), 0);
  in.last_rows = arange;
  be_.upload(in.input_ids.data(), DType::I32, ids_);
  be_.upload(in.positions.data(), DType::I32, pos_);
  std::vector<int32_t> slots(size_t(buckets_.back()), -1), ctx(size_t(buckets_.back()), 1);
  be_.upload(slots.data(), DType::I32, slot_);
  be_.upload(ctx.data(), DType::I32, ctx_);
  std::vector<int32_t> zeros(size_t(tables_.numel()), 0), cu(size_t(buckets_.back() + 1));
  be_.upload(zeros.data(), DType::I32, tables_);
  for (size_t i = 0; i < cu.size(); ++i) cu[i] = int32_t(i);
  be_.upload(cu.data(), DType::I32, cu_q_);
  be_.upload(cu.data(), DType::I32, cu_k_);
  bind_device_views(in.md, b);
  Tensor ids = ids_.rows(0, b), pos = pos_.rows(0, b);
  // One eager run first (library workspaces, kernel attributes), then the capture.
  be_.begin_step();
  model_.compute_logits(model_.forward(ids, pos, kv_, in.md), arange);
  be_.synchronize();
  be_.begin_step();
  be_.graph_capture_begin();
  Tensor logits = model_.compute_logits(model_.forward(ids, pos, kv_, in.md), arange);
  graph_[{b, range}] = be_.graph_capture_end();
  logits_[{b, range}] = logits;
}

Tensor CudaGraphRunner::run(const StepInputs& in, const Tensor* device_ids) {
  const int64_t B = in.md.num_seqs, b = bucket_for(B), n = buckets_.back();
  // Host image of the static inputs of bucket b: the packed layout of inputs_ up to the bucket's
  // block tables, one host->device copy. Padding rows: token 0 at position 0, slot -1 (no
  // write), context 1 in block 0.
  std::vector<int32_t>& h = host_inputs_;
  h.assign(size_t(6 * n + 2 + b * max_blocks_), 0);
  int32_t* ids = h.data();
  int32_t* pos = ids + n;
  int32_t* slot = pos + n;
  int32_t* ctx = slot + n;
  int32_t* cu_k = ctx + n;
  int32_t* cu_q = cu_k + n + 1;
  int32_t* tables = cu_q + n + 1;
  for (int64_t i = 0; i < b; ++i) {
    const bool real = i < B;
    ids[i] = real ? in.input_ids[size_t(i)] : 0;
    pos[i] = real ? in.positions[size_t(i)] : 0;
    slot[i] = real ? in.md.slot_mapping[size_t(i)] : -1;
    ctx[i] = real ? in.md.context_lens[size_t(i)] : 1;
    cu_k[i + 1] = cu_k[i] + ctx[i];
  }
  for (int64_t i = 0; i <= n; ++i) cu_q[i] = int32_t(i);  // as captured
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < in.md.max_blocks && j < max_blocks_; ++j) {
      const int32_t blk = in.md.block_tables[size_t(i * in.md.max_blocks + j)];
      tables[i * max_blocks_ + j] = blk < 0 ? 0 : blk;
    }
  // Inside the step, uploads go through the backend's pinned staging: asynchronous, no sync.
  be_.begin_step();
  // Ids already in place (the sampler of the step before wrote them): the upload starts after them.
  const bool in_place = device_ids && device_ids->raw() == ids_.raw();
  const int64_t from = in_place ? n : 0;
  Tensor head = inputs_.rows(from, int64_t(h.size()));
  be_.upload(h.data() + from, DType::I32, head);
  if (device_ids && !in_place) {  // after the upload, which wrote placeholders there
    Tensor dst = ids_.rows(0, B);
    be_.cast(*device_ids, dst);
  }
  int64_t longest = 1;
  for (int64_t i = 0; i < B; ++i) longest = std::max<int64_t>(longest, ctx[i]);
  const Key key{b, range_of(b, longest)};
  be_.graph_replay(graph_.at(key));
  return logits_.at(key).rows(0, B);
}

}  // namespace nanovllm
