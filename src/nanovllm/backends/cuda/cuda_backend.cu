// CUDA backend: device, stream, memory (persistent cudaMalloc + per-step arena), host<->device
// copies, attention metadata upload, CUDA graph hooks, and the device facts behind the ops' plans
// (kernel_plan.h). The ops live in the other .cu files.
#include "nanovllm/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "nanovllm/backends/cuda/attention_decode.cuh"
#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"

namespace nanovllm {

namespace cuda {
void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  std::string msg = std::string("CUDA error: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ") in " + what +
                    " at " + file + ":" + std::to_string(line);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw ResourceError(msg);
  }
  throw Error(msg);
}
}  // namespace cuda

using namespace cuda;

static constexpr size_t kAlign = 256;
static constexpr size_t kMinChunk = size_t(64) << 20;

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index, const KernelOptions& options) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    throw UserError(std::string("--device cuda: no CUDA GPU is usable (") +
                    (e != cudaSuccess ? cudaGetErrorString(e) : "no device found") + ")");
  }
  if (device_index < 0 || device_index >= n)
    throw UserError("--device cuda: GPU " + std::to_string(device_index) + " does not exist (" + std::to_string(n) +
                    " found)");
  return std::make_unique<CudaBackend>(device_index, options);
}

CudaBackend::CudaBackend(int device_index, const KernelOptions& options) : device_(device_index), options_(options) {
  options_.validate();
  NV_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  NV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  if (prop.major < 8)
    throw UserError(std::string("--device cuda: ") + prop.name + " (sm_" +
                    std::to_string(prop.major * 10 + prop.minor) +
                    ") is too old; the CUDA backend needs sm_80 or newer (BF16)");
  num_sms_ = prop.multiProcessorCount;
  l2_bytes_ = prop.l2CacheSize;
  sm_ = prop.major * 10 + prop.minor;
  pdl_ = prop.major >= 9 && options_.pdl;
  max_smem_optin_ = prop.sharedMemPerBlockOptin;
  cudaStream_t s;
  NV_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
  for (auto* ev :
       {&staging_done_[0], &staging_done_[1], &async_done_[0], &async_done_[1], &copy_done_[0], &copy_done_[1]}) {
    cudaEvent_t e;
    NV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *ev = e;
  }
  staging_bytes_ = size_t(4) << 20;  // each of the two halves
  NV_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&staging_), 2 * staging_bytes_));
  device_cluster_limit_ = cuda::decode_cluster_limit();
  cuda::prefill_attention_mma_init();
  cuda::int_gemv_v5_init();
  wgmma_ = cuda::prefill_attention_wgmma_init();
  if (wgmma_) cuda::int_gemm_wgmma_init(), cuda::int_gemm_wgmma_wide_init(), cuda::int_gemm_wgmma_ss_init();
  if (wgmma_) cuda::prefill_attention_wgmma_tma_init(), cuda::gemm_wgmma_init(), cuda::gemm_wgmma_add_rms_norm_init();
  if (wgmma_) gemm_pairs_ = cuda::gemm_wgmma_max_pairs();
  if (options_.gemm == Gemm::Wgmma && !wgmma_)
    throw UserError(std::string("kernel option gemm=wgmma: our Hopper GEMM needs an sm_90 GPU and a build with ") +
                    "sm_90a code (this is " + prop.name + ", sm_" + std::to_string(prop.major * 10 + prop.minor) + ")");
  if (options_.prefill_attention == PrefillAttention::Wgmma && !wgmma_)
    throw UserError(std::string("kernel option prefill_attention=wgmma: the wgmma kernel needs an sm_90 GPU and a ") +
                    "build with sm_90a code (this is " + prop.name + ", sm_" +
                    std::to_string(prop.major * 10 + prop.minor) + ")");
  // Chunks come from cudaMalloc; the stream is synchronized before one is freed (a compaction
  // between steps), since kernels of the last step may still read it.
  auto stream = static_cast<cudaStream_t>(stream_);
  arena_ = std::make_shared<StepArena>(
      [](size_t bytes) {
        void* p = nullptr;
        cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          throw ResourceError("out of GPU memory: the activation arena needs a chunk of " +
                              std::to_string(bytes >> 20) + " MiB (" + cudaGetErrorString(e) + ")");
        }
        return p;
      },
      [stream](void* p) {
        cudaStreamSynchronize(stream);
        cudaFree(p);
      },
      kAlign, kMinChunk);
  init_gemm();
}

Stream CudaBackend::on_stream() const { return Stream{static_cast<cudaStream_t>(stream_), pdl_}; }

// ---------------------------------------------------------------- plans (kernel_plan.h)

cuda::LinearPlan CudaBackend::plan_linear(const cuda::LinearProblem& problem) {
  cuda::LinearProblem p = problem;
  p.wgmma = wgmma_;
  return cuda::plan_linear(p, options_, [&] {
    const auto key = std::make_tuple(p.T, p.K, p.silu_mul);
    auto it = gemv_norm_wave_.find(key);
    if (it == gemv_norm_wave_.end())
      it = gemv_norm_wave_.emplace(key, cuda::gemv_norm_wave(p.T, p.K, p.silu_mul, num_sms_)).first;
    return it->second;
  });
}

const cuda::TmaDesc& CudaBackend::cache_tma(const Tensor& cache) {
  const int64_t slots = cache.size(0) * cache.size(1), row = cache.size(2) * cache.size(3);
  const auto key = std::make_tuple(static_cast<const void*>(cache.data<bf16>()), slots, row, cache.size(1));
  auto it = cache_tma_.find(key);
  if (it == cache_tma_.end())
    it = cache_tma_.emplace(key, cuda::make_cache_tma(cache.data<bf16>(), slots, row, cache.size(1))).first;
  return it->second;
}

std::vector<int64_t> CudaBackend::decode_context_breaks(int64_t batch) const {
  return cuda::decode_context_breaks(batch, options_);
}

cuda::DecodeAttentionPlan CudaBackend::plan_decode_attention(const cuda::DecodeAttentionProblem& p) const {
  return cuda::plan_decode_attention(
      p, num_sms_, device_cluster_limit_, options_, [&](int64_t head_dim, int64_t group, int warps, bool fp8) {
        const auto key = std::make_tuple(head_dim, group, warps, fp8);
        auto it = decode_resident_.find(key);
        if (it == decode_resident_.end())
          it = decode_resident_.emplace(key, cuda::decode_resident_ctas(int(head_dim), int(group), warps, fp8)).first;
        return it->second;
      });
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  destroy_gemm();
  arena_.reset();
  if (staging_) cudaFreeHost(staging_);
  if (pinned_tokens_) cudaFreeHost(pinned_tokens_);
  if (async_pinned_) cudaFreeHost(async_pinned_);
  if (async_dev_) cudaFree(async_dev_);
  if (mask_pinned_) cudaFreeHost(mask_pinned_);
  if (mask_dev_) cudaFree(mask_dev_);
  if (mask_copied_) cudaEventDestroy(static_cast<cudaEvent_t>(mask_copied_));
  if (sample_tickets_) cudaFree(sample_tickets_);
  for (char* p : copy_pinned_)
    if (p) cudaFreeHost(p);
  for (void* ev : {staging_done_[0], staging_done_[1], async_done_[0], async_done_[1], copy_done_[0], copy_done_[1]})
    if (ev) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

// ---------------------------------------------------------------- memory

void* CudaBackend::persistent_alloc(size_t bytes, const Shape& shape) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : kAlign);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw ResourceError("out of GPU memory: allocating " + std::to_string(bytes >> 20) + " MiB (" +
                        std::to_string(bytes) + " bytes) for a tensor of shape " + shape_str(shape) + " failed with " +
                        std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) + " MiB (" +
                        cudaGetErrorString(e) + ")");
  }
  NV_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream_)));
  return p;
}

void CudaBackend::begin_step() {
  if (capturing_) throw Error("cuda backend: begin_step() inside a CUDA graph capture");
  // Every tensor of the last step is dead: all blocks free. A step that spilled into several
  // chunks: merge them (not once graphs exist: their addresses are baked in).
  arena_->reset(/*may_compact=*/!graphs_exist_);
  // Steps alternate between the staging buffer's halves, so that a step can be prepared while the
  // one before runs (async scheduling); the half's previous uploads (two steps ago) must be done.
  staging_half_ ^= 1;
  NV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(staging_done_[staging_half_])));
  staging_off_ = 0;
  in_step_ = true;
}

Tensor CudaBackend::empty(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw Error("cuda backend: negative dimension in shape " + shape_str(shape));
    n *= d;
  }
  const size_t bytes = dtype_bytes(dtype, size_t(n));
  auto buf = std::make_shared<Buffer>();
  buf->bytes = bytes;
  buf->device = Device::CUDA;
  if (in_step_) {
    // A block of the step arena, back on its free list when the last view of the tensor is gone.
    buf->ptr = arena_->alloc(bytes, /*may_grow=*/!capturing_);
    buf->release = [arena = std::weak_ptr<StepArena>(arena_), gen = arena_->generation()](void* p) {
      if (auto a = arena.lock()) a->release(p, gen);
    };
  } else {
    buf->ptr = persistent_alloc(bytes, shape);
    *tensor_bytes_ += int64_t(bytes);
    buf->release = [held = tensor_bytes_, bytes](void* p) {
      cudaFree(p);
      *held -= int64_t(bytes);
    };
  }
  return Tensor(std::move(buf), dtype, shape);
}

int64_t CudaBackend::free_memory_bytes() {
  size_t f = 0, t = 0;
  NV_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  return int64_t(f);
}
int64_t CudaBackend::total_memory_bytes() {
  size_t f = 0, t = 0;
  NV_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  return int64_t(t);
}

void CudaBackend::synchronize() {
  if (capturing_) throw Error("cuda backend: synchronize() inside a CUDA graph capture");
  NV_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
  in_step_ = false;
}

// ---------------------------------------------------------------- copies

void* CudaBackend::staging_alloc(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (staging_off_ + bytes > staging_bytes_) return nullptr;
  void* p = staging_ + size_t(staging_half_) * staging_bytes_ + staging_off_;
  staging_off_ += bytes;
  return p;
}

void CudaBackend::h2d(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  auto s = static_cast<cudaStream_t>(stream_);
  if (capturing_) throw Error("cuda backend: host->device upload inside a CUDA graph capture");
  if (in_step_) {
    if (void* st = staging_alloc(bytes)) {
      std::memcpy(st, src, bytes);
      NV_CUDA_CHECK(cudaMemcpyAsync(dst, st, bytes, cudaMemcpyHostToDevice, s));
      NV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(staging_done_[staging_half_]), s));
      return;
    }
  }
  // Pageable source: cudaMemcpyAsync stages it before returning, then we wait for the copy so
  // that callers may free `src`.
  NV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  NV_CUDA_CHECK(cudaStreamSynchronize(s));
}

void CudaBackend::upload(const void* src, DType src_dtype, Tensor& dst) {
  if (dst.device() != Device::CUDA) throw Error("cuda upload: destination is not a CUDA tensor");
  const size_t n = size_t(dst.numel());
  if (n == 0) return;
  if (src_dtype == dst.dtype()) {
    h2d(dst.raw(), src, dst.nbytes());
    return;
  }
  const bool float_src = src_dtype == DType::F32 || src_dtype == DType::BF16 || src_dtype == DType::F16;
  if (!float_src)
    throw Error(std::string("cuda upload: cannot convert ") + dtype_name(src_dtype) + " to " + dtype_name(dst.dtype()));
  std::vector<float> f(n);
  convert_to_f32(src, src_dtype, n, f.data());
  if (dst.dtype() == DType::F32) {
    h2d(dst.raw(), f.data(), n * 4);
  } else if (dst.dtype() == DType::BF16) {
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(f[i]);
    h2d(dst.raw(), b.data(), n * 2);
  } else {
    throw Error(std::string("cuda upload: cannot convert ") + dtype_name(src_dtype) + " to " + dtype_name(dst.dtype()));
  }
}

void CudaBackend::download(const Tensor& src, void* dst) {
  if (capturing_) throw Error("cuda backend: download inside a CUDA graph capture");
  auto s = static_cast<cudaStream_t>(stream_);
  if (src.nbytes() == 0) return;
  NV_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, s));
  NV_CUDA_CHECK(cudaStreamSynchronize(s));
}

std::vector<float> CudaBackend::to_host_f32(const Tensor& t) {
  const size_t n = size_t(t.numel());
  std::vector<float> out(n);
  if (t.device() != Device::CUDA) throw Error("cuda to_host_f32: not a CUDA tensor");
  std::vector<char> raw(t.nbytes());
  download(t, raw.data());
  switch (t.dtype()) {
    case DType::F32:
    case DType::BF16:
    case DType::F16:
    case DType::F8E4M3: convert_to_f32(raw.data(), t.dtype(), n, out.data()); break;
    case DType::I32:
      for (size_t i = 0; i < n; ++i) out[i] = float(reinterpret_cast<int32_t*>(raw.data())[i]);
      break;
    case DType::I64:
      for (size_t i = 0; i < n; ++i) out[i] = float(reinterpret_cast<int64_t*>(raw.data())[i]);
      break;
    case DType::I8:
      for (size_t i = 0; i < n; ++i) out[i] = float(reinterpret_cast<int8_t*>(raw.data())[i]);
      break;
    case DType::U8:
      for (size_t i = 0; i < n; ++i) out[i] = float(reinterpret_cast<uint8_t*>(raw.data())[i]);
      break;
    case DType::U4:
      for (size_t i = 0; i < n; ++i)
        out[i] = float((reinterpret_cast<uint8_t*>(raw.data())[i / 2] >> (4 * (i % 2))) & 15);
      break;
  }
  return out;
}

// The copy goes to pinned slot ticket % 2, its event marking the end; a slot is reused two copies
// later, once the engine has waited for it (the event wait below only guards against a caller that
// did not).
Backend::HostCopy CudaBackend::to_host_f32_async(const Tensor& t) {
  if (t.device() != Device::CUDA) throw Error("cuda to_host_f32_async: not a CUDA tensor");
  if (capturing_) throw Error("cuda to_host_f32_async: inside a CUDA graph capture");
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16 && t.dtype() != DType::F16)
    throw Error("cuda to_host_f32_async: " + std::string(dtype_name(t.dtype())) + " is not a float tensor");
  auto s = static_cast<cudaStream_t>(stream_);
  HostCopy c;
  c.ticket = copy_next_++;
  c.dtype = t.dtype();
  c.n = t.numel();
  const size_t slot = size_t(c.ticket % 2);
  NV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(copy_done_[slot])));
  if (copy_cap_[slot] < t.nbytes()) {
    if (copy_pinned_[slot]) NV_CUDA_CHECK(cudaFreeHost(copy_pinned_[slot]));
    copy_pinned_[slot] = nullptr;
    copy_cap_[slot] = 0;
    NV_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&copy_pinned_[slot]), t.nbytes()));
    copy_cap_[slot] = t.nbytes();
  }
  if (t.nbytes() > 0)
    NV_CUDA_CHECK(cudaMemcpyAsync(copy_pinned_[slot], t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, s));
  NV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(copy_done_[slot]), s));
  return c;
}

size_t CudaBackend::wait_ticket_slot(int64_t ticket, int64_t next, void* const (&done)[2], const char* what,
                                     const char* of) {
  if (ticket < next - 2 || ticket >= next)
    throw Error(std::string(what) + ": ticket " + std::to_string(ticket) + " is not one of the last two " + of);
  const size_t slot = size_t(ticket % 2);
  NV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(done[slot])));
  return slot;
}

std::vector<float> CudaBackend::wait_host_f32(HostCopy& c) {
  if (c.ticket == -1) return c.host;
  const size_t slot = wait_ticket_slot(c.ticket, copy_next_, copy_done_, "wait_host_f32", "copies");
  c.host.resize(size_t(c.n));
  if (c.n > 0) convert_to_f32(copy_pinned_[slot], c.dtype, size_t(c.n), c.host.data());
  c.ticket = -1;
  return c.host;
}

Tensor CudaBackend::device_i32(const int32_t* host, int64_t n) {
  Tensor t = empty({n}, DType::I32);
  h2d(t.raw(), host, size_t(n) * 4);
  return t;
}

// All of md's vectors in one buffer and one host->device copy; the d_* tensors are views of it.
void CudaBackend::prepare_metadata(AttentionMetadata& md) {
  const std::vector<int32_t>* parts[] = {&md.cu_seqlens_q, &md.cu_seqlens_k, &md.slot_mapping, &md.context_lens,
                                         &md.block_tables};
  size_t offs[5], total = 0;
  for (int i = 0; i < 5; ++i) {
    offs[i] = total;
    total += (parts[i]->size() + 15) / 16 * 16;  // 64-byte aligned sections
  }
  std::vector<int32_t> packed(total, 0);
  for (int i = 0; i < 5; ++i) std::copy(parts[i]->begin(), parts[i]->end(), packed.begin() + int64_t(offs[i]));
  Tensor all = empty({int64_t(std::max<size_t>(total, 1))}, DType::I32);
  h2d(all.raw(), packed.data(), total * 4);
  Tensor* outs[] = {&md.d_cu_seqlens_q, &md.d_cu_seqlens_k, &md.d_slot_mapping, &md.d_context_lens, &md.d_block_tables};
  for (int i = 0; i < 5; ++i) *outs[i] = all.rows(int64_t(offs[i]), int64_t(offs[i] + parts[i]->size()));
  if (md.max_blocks > 0) md.d_block_tables = md.d_block_tables.view({md.num_seqs, md.max_blocks});
  md.d_rope_table = Tensor();  // built again by the forward's first fused qkv GEMM (qk_norm_rope.cu)
  md.rope_table_key.clear();
}

// ---------------------------------------------------------------- graphs

void CudaBackend::graph_capture_begin() {
  if (capturing_) throw Error("cuda backend: graph capture already in progress");
  NV_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_), cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

int64_t CudaBackend::graph_capture_end() {
  if (!capturing_) throw Error("cuda backend: graph_capture_end() without graph_capture_begin()");
  capturing_ = false;
  cudaGraph_t g = nullptr;
  NV_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream_), &g));
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  NV_CUDA_CHECK(e);
  graphs_exist_ = true;
  // The blocks still in use now are the graph's outputs (the tensors its caller kept): a replay
  // writes them, so it holds them for the rest of its step.
  graph_outputs_[reinterpret_cast<int64_t>(exec)] = arena_->used_blocks();
  return reinterpret_cast<int64_t>(exec);
}

void CudaBackend::graph_replay(int64_t handle) {
  if (capturing_) throw Error("cuda backend: graph_replay() inside a CUDA graph capture");
  auto it = graph_outputs_.find(handle);
  if (it != graph_outputs_.end())
    for (auto& [p, bytes] : it->second) arena_->hold(p, bytes);
  NV_CUDA_CHECK(cudaGraphLaunch(reinterpret_cast<cudaGraphExec_t>(handle), static_cast<cudaStream_t>(stream_)));
}

void CudaBackend::graph_destroy(int64_t handle) {
  graph_outputs_.erase(handle);
  if (handle) NV_CUDA_CHECK(cudaGraphExecDestroy(reinterpret_cast<cudaGraphExec_t>(handle)));
}

}  // namespace nanovllm
