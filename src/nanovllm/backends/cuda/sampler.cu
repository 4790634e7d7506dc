// GPU sampling: one CTA of 1024 threads per row of logits [B, V] (BF16 or F32), the same rules
// as the CPU reference (cpu_sampler.cpp):
//   greedy (temperature 0): argmax, lowest index on ties;
//   else p = softmax(logits / T) (p_i = float(exp(l_i / T - max) / sum), sum in double);
//   top-k keeps p >= the k-th largest p; top-p then keeps the largest-p prefix whose mass (over the
//   top-k mass) reaches top_p; min-p keeps p >= min_p * max p; the token is argmax p_i / E_i,
//   E_i = -log(sampling_uniform(seed, position, i)) (Gumbel-max, exponential form), taken in log
//   space as the score fma(l_i, 1/T, -log(E_i)).
// Rows without top-k / top-p / min-p (vLLM's and bench.py's default) need no softmax: one pass over
// the row computes the scores and the argmax fallback. The cost is the noise, not the bytes: the
// three passes it replaced (argmax, double sum, then p = exp / sum in double, the noise, p / E)
// took about twice as long at batch 256 (bench/RESULTS.md: "Sampler in one pass").
// The top-k / top-p thresholds are found by bisection on the float bits of p (31 counting or
// summing passes over the row each), which needs no sort and no scratch memory. Ties at a
// threshold keep every tied entry (the CPU keeps the lower indices): only exact ties differ.
// Rows with a structured-output mask, penalties, logit_bias or min_tokens first go through
// process_logits (an F32 copy of the batch's logits, masked and adjusted per row: the raw logits stay
// as the model made them, for raw logprobs), and rows that ask for logprobs through the logprobs
// kernel after sampling (logits_kernels.cu); a batch without either runs exactly the plain path.
// The masks of the rows that carry one go to the device in one copy (packed 32-bit words, staged in
// pinned memory; both buffers grow to the largest batch of masks seen, at least 512 rows, so steps
// do not allocate). A row whose every candidate is -inf (a mask that allows only banned tokens)
// gets token 0, as the CPU's argmax does.
// Batches of rows without top-k / top-p / min-p that leave SMs idle split each row over up to 64
// CTAs (sample_split_kernel; bench/RESULTS.md: "the sampler split over up to 64 CTAs").
// sample() brings the tokens (and logprobs) back with one device->host sync, the step's only
// synchronisation; sample_async() (async scheduling) does not wait: the sampler also writes each
// token into mapped host memory, read once the slot's event has passed.
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <type_traits>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/logits_kernels.h"
#include "nanovllm/backends/cuda/sampler_reduce.cuh"
#include "nanovllm/backends/sampling_noise.h"

namespace nanovllm {

using namespace cuda;

constexpr int kSampleThreads = 1024;
constexpr int64_t kMaxSampleSplits = 64;

struct DevRow {
  float temperature, top_p, min_p;
  int top_k;
  uint64_t seed;
  int64_t position;
};

// Visits every (logit, index) of a row in this thread's share, in increasing index order. BF16 rows
// of a multiple of 8 at 16-byte addresses go 8 at a time, 4 loads in flight: a batch-1 step is one
// CTA, where scalar loads, one round trip after another, were slow (bench/RESULTS.md: "From sampler.cu").
template <class T, class F>
__device__ __forceinline__ void for_each_logit(const T* __restrict__ lg, int64_t V, F&& f) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (V % 8 == 0 && reinterpret_cast<uintptr_t>(lg) % 16 == 0) {
      const uint4* lv = reinterpret_cast<const uint4*>(lg);
      const int64_t nv = V / 8;
#pragma unroll 4
      for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
        float x[8];
        unpack8(lv[c], x);
#pragma unroll
        for (int j = 0; j < 8; ++j) f(x[j], c * 8 + j);
      }
      return;
    }
  }
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) f(ld(lg, i), i);
}

// Row b's token into out[b] and, where given, into host_out[b] (host memory mapped into the device:
// sample_async's tokens reach the host without a copy on the stream).
__device__ __forceinline__ void put_token(int32_t* out, int32_t* host_out, int64_t b, int v) {
  if (v == 0x7fffffff) v = 0;  // every logit -inf: no argmax was found (the CPU's max_element: 0)
  out[b] = v;
  if (host_out) host_out[b] = v;
}

template <class T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const T* __restrict__ logits, int64_t V, const DevRow* __restrict__ rows, int32_t* __restrict__ out,
                  int32_t* __restrict__ host_out) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ double sd[32];
  pdl_begin();
  const int64_t b = blockIdx.x;
  const T* lg = logits + b * V;
  const DevRow r = rows[b];
  const float inv_t = r.temperature > 0.f ? 1.0f / r.temperature : 0.f;
  auto score = [&](float l, int64_t i) {
    const float e = -logf(sampling_uniform(r.seed, uint64_t(r.position), uint64_t(i)));
    return fmaf(l, inv_t, -logf(e));
  };

  // Argmax of the logits: the greedy token, and the fallback when every entry is filtered out.
  // Each thread scans its entries in increasing order with a strict >, so it keeps the lowest
  // index of its maximum (block_argmax settles ties across threads the same way).
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  auto consider = [&](float x, int64_t i) {
    if (x > bv) {
      bv = x;
      bi = int(i);
    }
  };
  const bool use_k = r.top_k > 0 && r.top_k < V, use_p = r.top_p < 1.0f;
  if (r.temperature > 0.f && !use_k && !use_p && r.min_p <= 0.f) {
    float best = -INFINITY;
    int besti = 0x7fffffff;
    for_each_logit(lg, V, [&](float x, int64_t i) {
      consider(x, i);
      const float s = score(x, i);
      if (s > best) {
        best = s;
        besti = int(i);
      }
    });
    block_argmax(bv, bi, sv, si);
    block_argmax(best, besti, sv, si);
    if (threadIdx.x == 0) put_token(out, host_out, b, best == -INFINITY ? bi : besti);
    return;
  }
  for_each_logit(lg, V, consider);
  block_argmax(bv, bi, sv, si);
  if (r.temperature <= 0.f) {
    if (threadIdx.x == 0) put_token(out, host_out, b, bi);
    return;
  }

  // max_i (l_i / T) is (max_i l_i) / T exactly: multiplying by inv_t > 0 rounds monotonically.
  const float mx = bv * inv_t;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) sum += double(expf(ld(lg, i) * inv_t - mx));
  sum = block_sum_d(sum, sd);
  auto prob = [&](int64_t i) { return float(double(expf(ld(lg, i) * inv_t - mx)) / sum); };

  // top-k: the bits of the k-th largest p (p >= 0, so float order = unsigned bit order).
  uint32_t tk = 0, tp = 0;
  if (use_k) {
    for (int bit = 30; bit >= 0; --bit) {
      const uint32_t cand = tk | (1u << bit);
      float cnt = 0;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) cnt += __float_as_uint(prob(i)) >= cand ? 1.f : 0.f;
      cnt = block_sum(cnt, sv);
      if (cnt >= float(r.top_k)) tk = cand;
    }
  }
  if (use_p) {
    double mass_k = 0;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float p = prob(i);
      if (__float_as_uint(p) >= tk) mass_k += p;
    }
    mass_k = block_sum_d(mass_k, sd);
    const double target = double(r.top_p) * mass_k;
    for (int bit = 30; bit >= 0; --bit) {
      const uint32_t cand = tp | (1u << bit);
      double mass = 0;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float p = prob(i);
        const uint32_t u = __float_as_uint(p);
        if (u >= cand && u >= tk) mass += p;
      }
      mass = block_sum_d(mass, sd);
      if (mass >= target) tp = cand;
    }
  }
  const uint32_t thr = tk > tp ? tk : tp;
  const float pmin = r.min_p > 0.f ? r.min_p * float(1.0 / sum) : 0.f;  // max p = exp(0) / sum

  float best = -INFINITY;
  int besti = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float l = ld(lg, i), p = prob(i);
    if (__float_as_uint(p) < thr || p < pmin) continue;
    const float s = score(l, i);
    if (s > best) {
      best = s;
      besti = int(i);
    }
  }
  block_argmax(best, besti, sv, si);
  if (threadIdx.x == 0) put_token(out, host_out, b, best == -INFINITY ? bi : besti);
}

// Rows without top-k, top-p or min-p (greedy, or plain temperature) at small batches, where one
// CTA per row leaves most SMs idle (bench/RESULTS.md: "11.15 us a call for one row"):
// grid (S, B). CTA s of row b reduces the slice [s * chunk, (s + 1) * chunk) to its highest logit
// and highest score (lowest index on ties, as sample_kernel), thread 0 stores the pair and takes a
// ticket; the row's last CTA (ticket S - 1) reduces the S partials in index order, writes the token
// and resets the ticket (graph replays and later launches find it zero).
struct SplitPartial {
  float bv, best;
  int bi, besti;
};

template <class T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_split_kernel(const T* __restrict__ logits, int64_t V, int64_t chunk, const DevRow* __restrict__ rows,
                        SplitPartial* __restrict__ part, unsigned* __restrict__ tickets, int32_t* __restrict__ out,
                        int32_t* __restrict__ host_out) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ bool last;
  pdl_begin();
  const int S = int(gridDim.x), s = int(blockIdx.x);
  const int64_t b = blockIdx.y, lo = int64_t(s) * chunk, n = min(V, lo + chunk) - lo;
  const DevRow r = rows[b];
  const bool sampled = r.temperature > 0.f;
  const float inv_t = sampled ? 1.0f / r.temperature : 0.f;
  float bv = -INFINITY, best = -INFINITY;
  int bi = 0x7fffffff, besti = 0x7fffffff;
  for_each_logit(logits + b * V + lo, n, [&](float x, int64_t j) {
    const int i = int(lo + j);
    if (x > bv) {
      bv = x;
      bi = i;
    }
    if (sampled) {
      const float e = -logf(sampling_uniform(r.seed, uint64_t(r.position), uint64_t(i)));
      const float sc = fmaf(x, inv_t, -logf(e));
      if (sc > best) {
        best = sc;
        besti = i;
      }
    }
  });
  block_argmax(bv, bi, sv, si);
  if (sampled) block_argmax(best, besti, sv, si);
  if (threadIdx.x == 0) {
    part[b * S + s] = {bv, best, bi, besti};
    __threadfence();
    last = atomicAdd(&tickets[b], 1u) == unsigned(S - 1);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  float v = -INFINITY, w = -INFINITY;
  int vi = 0x7fffffff, wi = 0x7fffffff;
  for (int k = int(threadIdx.x); k < S; k += 32) {  // a lane's slices in index order: > keeps the lowest
    const SplitPartial* q = part + b * S + k;
    const float pv = __ldcg(&q->bv), pw = __ldcg(&q->best);
    const int pvi = __ldcg(&q->bi), pwi = __ldcg(&q->besti);
    if (pv > v) {
      v = pv;
      vi = pvi;
    }
    if (pw > w) {
      w = pw;
      wi = pwi;
    }
  }
  warp_argmax(v, vi);
  warp_argmax(w, wi);
  if (threadIdx.x != 0) return;
  tickets[b] = 0;
  put_token(out, host_out, b, !sampled || w == -INFINITY ? vi : wi);
}

namespace {

// One row of launch_logprobs' output: logprob, rank, then n (id bits, logprob) pairs.
TokenLogprobs unpack_logprobs(const float* o, int n) {
  TokenLogprobs t;
  t.logprob = o[0];
  t.rank = int32_t(o[1]);
  for (int j = 0; j < n; ++j) {
    int32_t id;
    std::memcpy(&id, &o[2 + 2 * j], 4);
    t.top.emplace_back(id, o[3 + 2 * j]);
  }
  return t;
}

}  // namespace

struct CudaBackend::LogprobLaunch {
  std::vector<DevLogprobRow> rows;  // the rows that asked, in batch order
  Tensor out;                       // [rows, 2 + 2 max_n] floats
  int64_t stride = 0;               // 2 + 2 max_n
};

// The masks of `masks` (one per masked row, (V + 31) / 32 words each) packed into pinned memory and
// sent to the device in one copy; the device copy, valid in stream order until the next call.
const uint32_t* CudaBackend::upload_masks(const std::vector<const uint32_t*>& masks, int64_t V) {
  if (masks.empty()) return nullptr;
  const size_t W = size_t((V + 31) / 32), words = masks.size() * W;
  auto s = static_cast<cudaStream_t>(stream_);
  if (!mask_copied_) {
    cudaEvent_t e;
    NV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    mask_copied_ = e;
  }
  if (mask_cap_words_ < words) {  // first use, or more masks than ever: at least 512 rows' worth
    NV_CUDA_CHECK(cudaStreamSynchronize(s));
    if (mask_pinned_) NV_CUDA_CHECK(cudaFreeHost(mask_pinned_));
    if (mask_dev_) NV_CUDA_CHECK(cudaFree(mask_dev_));
    mask_pinned_ = nullptr;
    mask_dev_ = nullptr;
    mask_cap_words_ = std::max(words, 512 * W);
    NV_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&mask_pinned_), mask_cap_words_ * 4));
    NV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&mask_dev_), mask_cap_words_ * 4));
  }
  NV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(mask_copied_)));  // the last copy has left it
  for (size_t k = 0; k < masks.size(); ++k) std::memcpy(mask_pinned_ + k * W, masks[k], W * 4);
  NV_CUDA_CHECK(cudaMemcpyAsync(mask_dev_, mask_pinned_, words * 4, cudaMemcpyHostToDevice, s));
  NV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(mask_copied_), s));
  return mask_dev_;
}

void CudaBackend::enqueue_sampling(const Tensor& logits, const std::vector<SamplingRow>& rows, Tensor& dout,
                                   LogprobLaunch& lp, int32_t* host_out) {
  if (logits.dim() != 2 || logits.size(0) != int64_t(rows.size()) ||
      (logits.dtype() != DType::F32 && logits.dtype() != DType::BF16) || logits.device() != Device::CUDA)
    throw Error("sample: logits must be F32 or BF16 [B, V] on the GPU with one sampling row each, got " +
                shape_str(logits.shape()) + " " + dtype_name(logits.dtype()));
  if (capturing_) throw Error("sample: cannot run inside a CUDA graph capture (it synchronizes)");
  const int64_t B = logits.size(0), V = logits.size(1);
  if (V >= int64_t(0x7fffffff)) throw Error("sample: vocabulary too large");
  std::vector<DevRow> host(static_cast<size_t>(B));
  // Logits processing and logprobs: packed only when some row asks (the plain path is unchanged).
  std::vector<DevPenalties> pens;
  std::vector<LogitAdjust> entries;
  std::vector<const uint32_t*> masks;  // of the rows that carry one, in batch order
  int64_t max_n = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = rows[size_t(b)];
    host[size_t(b)] = {r.temperature, r.top_p, r.min_p, r.top_k, r.seed, r.position};
    const bool has_entries = r.processing && !r.processing->entries.empty();
    if ((has_entries || r.allowed) && pens.empty()) pens.assign(size_t(B), DevPenalties{1.f, 0.f, 0.f, 0, 0, -1});
    if (has_entries) {
      const auto& p = *r.processing;
      for (auto& e : p.entries)
        if (e.token < 0 || e.token >= V) throw Error("sample: logits processing names a token outside the vocabulary");
      pens[size_t(b)] = {p.repetition_penalty,
                         p.frequency_penalty,
                         p.presence_penalty,
                         int32_t(entries.size()),
                         int32_t(entries.size() + p.entries.size()),
                         -1};
      entries.insert(entries.end(), p.entries.begin(), p.entries.end());
    }
    if (r.allowed) {
      pens[size_t(b)].mask = int32_t(masks.size());
      masks.push_back(r.allowed);
    }
    if (r.num_logprobs >= 0) {
      const float scale = r.processed_logprobs && r.temperature > 0 ? 1.0f / r.temperature : 1.0f;
      lp.rows.push_back(
          {int32_t(b), std::min<int32_t>(r.num_logprobs, int32_t(V)), r.processed_logprobs ? 1 : 0, scale});
      max_n = std::max<int64_t>(max_n, lp.rows.back().n);
    }
  }
  auto upload = [&](const void* data, size_t bytes) {
    Tensor t = empty({int64_t((bytes + 3) / 4)}, DType::I32);
    h2d(t.raw(), data, bytes);
    return t;
  };
  Tensor processed;  // [B, V] F32 when some row has entries
  if (!pens.empty()) {
    processed = empty({B, V}, DType::F32);
    Tensor dpens = upload(pens.data(), pens.size() * sizeof(DevPenalties));
    Tensor dentries = upload(entries.data(), entries.size() * sizeof(LogitAdjust));
    launch_process_logits(logits.raw(), logits.dtype(), B, V, static_cast<const DevPenalties*>(dpens.raw()),
                          dentries.raw(), upload_masks(masks, V), processed.data<float>(), on_stream());
  }
  Tensor drows = upload(host.data(), host.size() * sizeof(DevRow));
  const Tensor& src = pens.empty() ? logits : processed;
  const auto* drow = static_cast<const DevRow*>(drows.raw());
  // Split rows over S CTAs where B rows leave SMs idle and no row filters (top-k/top-p/min-p need
  // the whole row in one CTA): slices of 8 logits per thread, at most 2 waves of CTAs in all.
  const bool plain = std::all_of(rows.begin(), rows.end(), [&](const SamplingRow& r) {
    return (r.top_k <= 0 || r.top_k >= V) && r.top_p >= 1.0f && r.min_p <= 0.f;
  });
  const int64_t slice = int64_t(kSampleThreads) * 8;
  const int64_t S = std::min<int64_t>({ceil_div(V, slice), 2 * int64_t(num_sms_) / B, kMaxSampleSplits});
  if (plain && S >= 2) {
    if (sample_tickets_n_ < size_t(B)) {  // zeroed counters, one per row, left zero by every launch
      NV_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
      if (sample_tickets_) NV_CUDA_CHECK(cudaFree(sample_tickets_));
      sample_tickets_n_ = std::max<size_t>(size_t(B), 256);
      NV_CUDA_CHECK(cudaMalloc(&sample_tickets_, sample_tickets_n_ * 4));
      NV_CUDA_CHECK(cudaMemset(sample_tickets_, 0, sample_tickets_n_ * 4));
    }
    const int64_t chunk = ceil_div(ceil_div(V, S), int64_t(8)) * 8;
    Tensor part = empty({B * S * int64_t(sizeof(SplitPartial) / 4)}, DType::I32);
    const dim3 grid(unsigned(ceil_div(V, chunk)), unsigned(B));
    auto* parts = static_cast<SplitPartial*>(part.raw());
    auto* tickets = static_cast<unsigned*>(sample_tickets_);
    if (src.dtype() == DType::F32)
      launch(sample_split_kernel<float>, grid, kSampleThreads, 0, on_stream(), src.data<float>(), V, chunk, drow, parts,
             tickets, dout.data<int32_t>(), host_out);
    else
      launch(sample_split_kernel<bf16>, grid, kSampleThreads, 0, on_stream(), src.data<bf16>(), V, chunk, drow, parts,
             tickets, dout.data<int32_t>(), host_out);
  } else if (src.dtype() == DType::F32) {
    launch(sample_kernel<float>, unsigned(B), kSampleThreads, 0, on_stream(), src.data<float>(), V, drow,
           dout.data<int32_t>(), host_out);
  } else {
    launch(sample_kernel<bf16>, unsigned(B), kSampleThreads, 0, on_stream(), src.data<bf16>(), V, drow,
           dout.data<int32_t>(), host_out);
  }
  if (lp.rows.empty()) return;
  lp.stride = 2 + 2 * max_n;
  // Processed logprobs of a row without entries or mask read its raw logits (nothing was applied).
  for (auto& r : lp.rows)
    if (pens.empty() || (pens[size_t(r.row)].begin == pens[size_t(r.row)].end && pens[size_t(r.row)].mask < 0))
      r.processed = 0;
  Tensor dlprows = upload(lp.rows.data(), lp.rows.size() * sizeof(DevLogprobRow));
  lp.out = empty({int64_t(lp.rows.size()) * lp.stride}, DType::F32);
  launch_logprobs(logits.raw(), logits.dtype(), pens.empty() ? nullptr : processed.data<float>(), V,
                  static_cast<const DevLogprobRow*>(dlprows.raw()), int64_t(lp.rows.size()), dout.data<int32_t>(),
                  lp.out.data<float>(), max_n, on_stream());
}

std::vector<int32_t> CudaBackend::sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                         std::vector<TokenLogprobs>* logprobs) {
  const int64_t B = logits.dim() == 2 ? logits.size(0) : 0;
  if (B == 0 && logits.dim() == 2 && rows.empty()) return {};
  Tensor dout = empty({B}, DType::I32);
  LogprobLaunch lp;
  enqueue_sampling(logits, rows, dout, lp);
  if (!lp.rows.empty() && !logprobs) throw Error("sample: a row asks for logprobs but no output was given");
  auto s = static_cast<cudaStream_t>(stream_);
  if (pinned_tokens_n_ < size_t(B)) {
    if (pinned_tokens_) NV_CUDA_CHECK(cudaFreeHost(pinned_tokens_));
    pinned_tokens_ = nullptr;
    pinned_tokens_n_ = std::max<size_t>(size_t(B), 1024);
    NV_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_tokens_), pinned_tokens_n_ * 4));
  }
  NV_CUDA_CHECK(cudaMemcpyAsync(pinned_tokens_, dout.raw(), size_t(B) * 4, cudaMemcpyDeviceToHost, s));
  std::vector<float> lp_host(lp.rows.size() * size_t(lp.stride));
  if (!lp.rows.empty())
    NV_CUDA_CHECK(cudaMemcpyAsync(lp_host.data(), lp.out.raw(), lp_host.size() * 4, cudaMemcpyDeviceToHost, s));
  NV_CUDA_CHECK(cudaStreamSynchronize(s));
  in_step_ = false;  // the step ends with its tokens
  if (logprobs) {
    logprobs->assign(size_t(B), TokenLogprobs{});
    for (size_t k = 0; k < lp.rows.size(); ++k)
      (*logprobs)[size_t(lp.rows[k].row)] = unpack_logprobs(lp_host.data() + k * size_t(lp.stride), lp.rows[k].n);
  }
  return std::vector<int32_t>(pinned_tokens_, pinned_tokens_ + B);
}

// The tokens go to slot ticket % 2 of the device and mapped host buffers; the slot's event marks
// the end of its sampler. A slot is reused two samplings later, when the engine has waited
// for it (the event wait below only guards against a caller that did not).
Backend::SampledTokens CudaBackend::sample_async(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                                 const Tensor* device_out) {
  for (const auto& r : rows)
    if (r.num_logprobs >= 0) throw Error("sample_async: a row asks for logprobs (use sample)");
  const int64_t B = logits.dim() == 2 ? logits.size(0) : 0;
  auto s = static_cast<cudaStream_t>(stream_);
  // First use, or a larger batch: buffers for both slots.
  if (async_cap_ < size_t(B)) {
    NV_CUDA_CHECK(cudaStreamSynchronize(s));  // the old slots may still be in use
    if (async_pinned_) NV_CUDA_CHECK(cudaFreeHost(async_pinned_));
    if (async_dev_) NV_CUDA_CHECK(cudaFree(async_dev_));
    async_pinned_ = nullptr;
    async_dev_ = nullptr;
    async_cap_ = std::max<size_t>(size_t(B), 1024);
    NV_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&async_pinned_), 2 * async_cap_ * 4, cudaHostAllocMapped));
    NV_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&async_mapped_), async_pinned_, 0));
    NV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&async_dev_), 2 * async_cap_ * 4));
  }
  const int64_t ticket = async_next_++;
  const size_t slot = size_t(ticket % 2);
  auto done = static_cast<cudaEvent_t>(async_done_[slot]);
  NV_CUDA_CHECK(cudaEventSynchronize(done));  // the slot's previous copy has landed
  SampledTokens t;
  if (device_out) {
    if (device_out->numel() != B || device_out->dtype() != DType::I32 || device_out->device() != Device::CUDA)
      throw Error("sample_async: device_out must be [" + std::to_string(B) + "] I32 on the GPU");
    t.device = *device_out;
  } else {
    auto buf = std::make_shared<Buffer>();
    buf->ptr = async_dev_ + slot * async_cap_;
    buf->bytes = size_t(B) * 4;
    buf->device = Device::CUDA;
    buf->release = [](void*) {};  // the backend owns the slots
    t.device = Tensor(std::move(buf), DType::I32, {B});
  }
  t.ticket = ticket;
  LogprobLaunch lp;
  // The sampler writes the host's copy itself (mapped memory): no copy on the stream.
  enqueue_sampling(logits, rows, t.device, lp, async_mapped_ + slot * async_cap_);
  NV_CUDA_CHECK(cudaEventRecord(done, s));
  in_step_ = false;  // the step ends with its tokens
  return t;
}

std::vector<int32_t> CudaBackend::wait_tokens(SampledTokens& t) {
  if (t.ticket == -1) return t.host;
  const size_t slot = wait_ticket_slot(t.ticket, async_next_, async_done_, "wait_tokens", "samplings");
  const int32_t* p = async_pinned_ + slot * async_cap_;
  t.host.assign(p, p + t.device.numel());
  t.ticket = -1;
  return t.host;
}

std::vector<TokenLogprobs> CudaBackend::token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens,
                                                       int n) {
  if (logits.dim() != 2 || logits.size(0) != int64_t(tokens.size()) ||
      (logits.dtype() != DType::F32 && logits.dtype() != DType::BF16) || logits.device() != Device::CUDA)
    throw Error("token_logprobs: logits must be F32 or BF16 [B, V] on the GPU with one token each, got " +
                shape_str(logits.shape()));
  if (capturing_) throw Error("token_logprobs: cannot run inside a CUDA graph capture (it synchronizes)");
  const int64_t B = logits.size(0), V = logits.size(1);
  if (B == 0) return {};
  for (int32_t t : tokens)
    if (t < 0 || t >= V) throw Error("token_logprobs: token id " + std::to_string(t) + " is outside the vocabulary");
  const int32_t nn = std::min<int32_t>(n, int32_t(V));
  std::vector<DevLogprobRow> rows;
  for (int64_t b = 0; b < B; ++b) rows.push_back({int32_t(b), nn, 0, 1.0f});
  Tensor drows = empty({int64_t(rows.size() * sizeof(DevLogprobRow) / 4)}, DType::I32);
  h2d(drows.raw(), rows.data(), rows.size() * sizeof(DevLogprobRow));
  Tensor dtok = empty({B}, DType::I32);
  h2d(dtok.raw(), tokens.data(), tokens.size() * 4);
  const int64_t stride = 2 + 2 * int64_t(nn);
  Tensor dlp = empty({B * stride}, DType::F32);
  launch_logprobs(logits.raw(), logits.dtype(), nullptr, V, static_cast<const DevLogprobRow*>(drows.raw()), B,
                  dtok.data<int32_t>(), dlp.data<float>(), nn, on_stream());
  std::vector<float> host(static_cast<size_t>(B * stride));
  auto s = static_cast<cudaStream_t>(stream_);
  NV_CUDA_CHECK(cudaMemcpyAsync(host.data(), dlp.raw(), host.size() * 4, cudaMemcpyDeviceToHost, s));
  NV_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<TokenLogprobs> out;
  for (int64_t b = 0; b < B; ++b) out.push_back(unpack_logprobs(host.data() + b * stride, nn));
  return out;
}

}  // namespace nanovllm
