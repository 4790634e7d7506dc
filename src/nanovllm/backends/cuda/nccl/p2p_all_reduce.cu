#include "nanovllm/backends/cuda/nccl/p2p_all_reduce.h"

#include <unistd.h>

#include <cstring>
#include <type_traits>

namespace nanovllm {

using namespace cuda;

namespace {

constexpr int kBlocks = 8;     // fixed grid: every block takes part in every call (see the header)
constexpr int kThreads = 128;
// Layout of each rank's allocation: two data halves, then flags[kBlocks][kMaxRanks] (written by
// the peers: the call number of block b of rank r), then epochs[kBlocks] (this rank's call count).
constexpr size_t kFlagsOff = 2 * P2pAllReduce::kMaxBytes;
constexpr size_t kEpochsOff = kFlagsOff + sizeof(uint32_t) * kBlocks * P2pAllReduce::kMaxRanks;
// Then the fused kernel's LL buffers: [2 halves][kMaxRanks sources][lines of 16 bytes], a line
// {x0, e, x1, e} carrying two floats of the source rank and the call number twice.
constexpr size_t kLLSlot = 2 * P2pAllReduce::kMaxBytes;  // lines for kMaxBytes of floats
constexpr size_t kLLHalf = kLLSlot * P2pAllReduce::kMaxRanks;
constexpr size_t kLLOff = (kEpochsOff + sizeof(uint32_t) * kBlocks + 255) / 256 * 256;
constexpr size_t kAllocBytes = kLLOff + 2 * kLLHalf;

struct Peers {
  char* base[P2pAllReduce::kMaxRanks];
};

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// A peer's data, never from a stale L1 line (the same half is rewritten two calls later).
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Block b's data of call e is in its rank's buffer: tell every peer (thread r raises this rank's
// flag at rank r) and wait until every peer has said the same. Called by all threads of the block.
__device__ __forceinline__ void exchange_flags(const Peers& P, int rank, int world, uint32_t e) {
  const int b = blockIdx.x, tid = threadIdx.x;
  __syncthreads();  // the block's part is written
  if (tid < world) {
    __threadfence_system();
    store_release_sys(reinterpret_cast<uint32_t*>(P.base[tid] + kFlagsOff) + b * P2pAllReduce::kMaxRanks + rank, e);
    const uint32_t* flag = reinterpret_cast<const uint32_t*>(P.base[rank] + kFlagsOff) + b * P2pAllReduce::kMaxRanks + tid;
    const uint64_t t0 = global_ns();
    while (int32_t(load_acquire_sys(flag) - e) < 0)
      if (global_ns() - t0 > 30ull * 1000 * 1000 * 1000) __trap();  // a peer is gone
  }
  __syncthreads();
}

// Claims this block's call number: epochs[b] + 1, except that the wrap goes from 0xffffffff to 2
// (odd to even, as every step; the LL lines' zero initial flags never match), stored back at once
// and fenced, and shared with the block. Every all-reduce kernel claims before it lets its
// successor launch (pdl_begin), and claims before its own wait: so the next all-reduce, even one
// launched right behind this one with no kernel between (which starts while this one still runs),
// reads the count this one stored. (A count stored at the end, as before, raced there: both calls
// took the same number and the ranks fell out of step.) Volatile: the line may be in this SM's L1
// from an earlier read.
__device__ __forceinline__ uint32_t claim_call(const Peers& P, int rank, uint32_t* s_epoch) {
  if (threadIdx.x == 0) {
    volatile uint32_t* epochs = reinterpret_cast<volatile uint32_t*>(P.base[rank] + kEpochsOff);
    const uint32_t last = epochs[blockIdx.x];
    *s_epoch = last == 0xffffffffu ? 2u : last + 1;
    epochs[blockIdx.x] = *s_epoch;
    __threadfence();
  }
  __syncthreads();
  return *s_epoch;
}

__device__ __forceinline__ void store_volatile(uint4* p, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// x: nv 16-byte vectors of T (float or bf16), summed in place over the world's ranks.
template <class T>
__global__ void __launch_bounds__(kThreads) p2p_all_reduce_kernel(uint4* __restrict__ x, int64_t nv, Peers P,
                                                                   int rank, int world) {
  __shared__ uint32_t s_epoch;
  const uint32_t e = claim_call(P, rank, &s_epoch);
  pdl_begin();
  const int b = blockIdx.x, tid = threadIdx.x;
  const size_t half = size_t(e & 1) * P2pAllReduce::kMaxBytes;
  const int64_t per = (nv + kBlocks - 1) / kBlocks, lo = b * per, hi = min(nv, lo + per);

  uint4* mine = reinterpret_cast<uint4*>(P.base[rank] + half);
  for (int64_t i = lo + tid; i < hi; i += kThreads) mine[i] = x[i];
  exchange_flags(P, rank, world, e);

  constexpr int kE = 16 / sizeof(T);  // elements per vector
  for (int64_t i = lo + tid; i < hi; i += kThreads) {
    float acc[kE] = {};
    for (int r = 0; r < world; ++r) {  // rank order: every rank adds the same values the same way
      const uint4 v = load_volatile(reinterpret_cast<const uint4*>(P.base[r] + half) + i);
      if constexpr (std::is_same_v<T, float>) {
        const float* f = reinterpret_cast<const float*>(&v);
#pragma unroll
        for (int k = 0; k < kE; ++k) acc[k] += f[k];
      } else {
        float f[8];
        unpack8(v, f);
#pragma unroll
        for (int k = 0; k < kE; ++k) acc[k] += f[k];
      }
    }
    if constexpr (std::is_same_v<T, float>)
      x[i] = make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]), __float_as_uint(acc[3]));
    else
      x[i] = pack8(acc);
  }
}

// The all-reduce of F32 partial sums fused with the residual add + RMSNorm after it: the same
// arithmetic as all-reduce, cast to BF16, then elementwise.cu's rms_norm_kernel<true>, per row t:
//   s = bf16(sum over ranks of partial[t], in rank order); residual[t] = bf16(residual[t] + s);
//   out[t] = bf16(bf16(residual[t] * rsqrt(mean(residual[t]^2) + eps)) * w).
// partial, residual, out: [T, H]; w: [H]. Block b owns rows b, b + kBlocks, ... (every block
// counts every call, rows or not, as the plain kernel). Threads take 8-element groups
// i = tid + k * blockDim (k < kV) as rms_norm_kernel does, with the same block size, so the sum of
// squares adds in the same order: bit-identical to the unfused ops.
// The exchange is NCCL's "LL" protocol: each rank pushes its floats into every peer's LL buffer
// as 16-byte lines {x0, e, x1, e}, whose two 8-byte halves each land whole, so a reader that sees
// the call number e in both halves has the data: no fence, no separate flag, one NVLink crossing
// (the plain kernel's copy, flag and remote read take three). Buffers alternate by call parity
// like the plain kernel's, and lines of call e - 2 carry another number.
template <int kWorld, int kV>
__global__ void __launch_bounds__(512) p2p_all_reduce_add_rms_norm_kernel(const float* __restrict__ partial, int T, int H,
                                                   bf16* __restrict__ residual, const bf16* __restrict__ w,
                                                   bf16* __restrict__ out, float eps, Peers P, int rank) {
  __shared__ uint32_t s_epoch;
  __shared__ float red[32];
  const int b = blockIdx.x, tid = threadIdx.x, groups = H / 8;
  // Before the wait on the GEMV that writes `partial`: the call number (claim_call), the norm
  // weights and the block's first residual row (written by the fused call before that GEMV), so
  // these loads leave the critical path.
  const uint32_t e = claim_call(P, rank, &s_epoch);
  uint4 wv[kV], rv[kV];
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const int i = tid + k * int(blockDim.x);
    if (i < groups && b < T) {
      wv[k] = reinterpret_cast<const uint4*>(w)[i];
      rv[k] = reinterpret_cast<const uint4*>(residual + size_t(b) * H)[i];
    }
  }
  pdl_begin();
  const size_t half = kLLOff + size_t(e & 1) * kLLHalf;
  for (int t = b; t < T; t += kBlocks) {
    const size_t line0 = size_t(t) * (H / 2);  // row t's first line in a source's slot
    float mine[kV][8];
#pragma unroll
    for (int k = 0; k < kV; ++k) {  // this rank's groups, pushed to every peer
      const int i = tid + k * int(blockDim.x);
      if (i >= groups) continue;
      const float4 lo = reinterpret_cast<const float4*>(partial + size_t(t) * H)[2 * i];
      const float4 hi = reinterpret_cast<const float4*>(partial + size_t(t) * H)[2 * i + 1];
      const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) mine[k][j] = f[j];
#pragma unroll
      for (int r = 0; r < kWorld; ++r) {
        if (r == rank) continue;
        uint4* dst = reinterpret_cast<uint4*>(P.base[r] + half + size_t(rank) * kLLSlot) + line0 + size_t(i) * 4;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          store_volatile(dst + j, make_uint4(__float_as_uint(f[2 * j]), e, __float_as_uint(f[2 * j + 1]), e));
      }
    }
    float acc[kV][8] = {};
#pragma unroll 1
    for (int r = 0; r < kWorld; ++r) {  // rank order: every rank adds the same values the same way
      if (r == rank) {
#pragma unroll
        for (int k = 0; k < kV; ++k)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[k][j] += mine[k][j];
        continue;
      }
      const uint4* src = reinterpret_cast<const uint4*>(P.base[rank] + half + size_t(r) * kLLSlot) + line0;
      uint4 ln[kV][4];
      const uint64_t t0 = global_ns();
      for (bool all = false; !all;) {  // every line of this source loaded at once, until all are there
        all = true;
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          const int i = tid + k * int(blockDim.x);
          if (i >= groups) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            ln[k][j] = load_volatile(src + size_t(i) * 4 + j);
            all = all && ln[k][j].y == e && ln[k][j].w == e;
          }
        }
        if (!all && global_ns() - t0 > 30ull * 1000 * 1000 * 1000) __trap();  // a peer is gone
      }
#pragma unroll
      for (int k = 0; k < kV; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[k][2 * j] += __uint_as_float(ln[k][j].x);
          acc[k][2 * j + 1] += __uint_as_float(ln[k][j].z);
        }
    }
    float a[kV][8];
    float ss = 0.f;
    bf16* rr = residual + size_t(t) * H;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const int i = tid + k * int(blockDim.x);
      if (i >= groups) continue;
      float res[8];
      unpack8(t == b ? rv[k] : reinterpret_cast<const uint4*>(rr)[i], res);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[k][j] = bf16_round(bf16_round(acc[k][j]) + res[j]);
      reinterpret_cast<uint4*>(rr)[i] = pack8(a[k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += a[k][j] * a[k][j];
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / float(H) + eps);
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const int i = tid + k * int(blockDim.x);
      if (i >= groups) continue;
      float ww[8];
      unpack8(wv[k], ww);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[k][j] = bf16_round(a[k][j] * inv) * ww[j];
      reinterpret_cast<uint4*>(out + size_t(t) * H)[i] = pack8(a[k]);
    }
  }
}

struct Exchange {  // what each rank publishes about its allocation
  int32_t pid;
  int32_t device;
  int32_t ok;
  int32_t pad;
  uint64_t ptr;
  cudaIpcMemHandle_t handle;
};

}  // namespace

P2pAllReduce::P2pAllReduce(int rank, int world, int device, Stream stream, const AllGather& all_gather, bool enabled)
    : rank_(rank), world_(world), stream_(stream) {
  Exchange me{};
  me.pid = int32_t(getpid());
  me.device = device;
  me.ok = enabled && world >= 2 && world <= kMaxRanks;
  if (me.ok) {  // no throwing before the exchange: the other ranks are waiting in it
    me.ok = cudaMalloc(&mine_, kAllocBytes) == cudaSuccess && cudaMemset(mine_, 0, kAllocBytes) == cudaSuccess &&
            cudaDeviceSynchronize() == cudaSuccess && cudaIpcGetMemHandle(&me.handle, mine_) == cudaSuccess;
    me.ptr = reinterpret_cast<uint64_t>(mine_);
    (void)cudaGetLastError();
  }
  std::vector<uint8_t> bytes(sizeof(Exchange));
  std::memcpy(bytes.data(), &me, sizeof(me));
  auto all = all_gather(bytes);
  if (all.size() != sizeof(Exchange) * size_t(world)) throw Error("p2p all-reduce: bad address exchange");
  std::vector<Exchange> ex(static_cast<size_t>(world));
  std::memcpy(ex.data(), all.data(), all.size());
  bool ok = true;
  for (auto& x : ex) ok = ok && x.ok;
  // Map every peer: the pointer itself within one process (peer access), else its IPC handle.
  peers_.assign(size_t(world), nullptr);
  for (int r = 0; ok && r < world; ++r) {
    if (r == rank) {
      peers_[size_t(r)] = mine_;
      continue;
    }
    int can = 0;
    ok = cudaDeviceCanAccessPeer(&can, device, ex[size_t(r)].device) == cudaSuccess && can;
    if (!ok) break;
    if (ex[size_t(r)].pid == me.pid) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(ex[size_t(r)].device, 0);
      ok = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
      peers_[size_t(r)] = reinterpret_cast<char*>(ex[size_t(r)].ptr);
    } else {
      void* p = nullptr;
      ok = cudaIpcOpenMemHandle(&p, ex[size_t(r)].handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess;
      if (ok) opened_.push_back(static_cast<char*>(p));
      peers_[size_t(r)] = static_cast<char*>(p);
    }
    (void)cudaGetLastError();
  }
  // Every rank must take the same path: agree on whether all of them mapped all peers.
  std::vector<uint8_t> flag{uint8_t(ok)};
  for (uint8_t f : all_gather(flag)) ok = ok && f;
  usable_ = ok;
}

// Our own buffer is not freed: a peer may still be reading it in its last all-reduce, and waiting
// for it would be a barrier at exit (which a dead peer would hang). It goes with the process.
P2pAllReduce::~P2pAllReduce() {
  cudaStreamSynchronize(stream_.stream);
  for (char* p : opened_) cudaIpcCloseMemHandle(p);
}

bool P2pAllReduce::run(void* x, int64_t n, DType dt) {
  const size_t esize = dt == DType::F32 ? 4 : dt == DType::BF16 ? 2 : 0;
  const size_t bytes = size_t(n) * esize;
  if (!usable_ || esize == 0 || n <= 0 || bytes > kMaxBytes || bytes % 16 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return false;
  Peers P{};
  for (int r = 0; r < world_; ++r) P.base[r] = peers_[size_t(r)];
  auto* xv = static_cast<uint4*>(x);
  const int64_t nv = int64_t(bytes / 16);
  if (dt == DType::F32) launch(p2p_all_reduce_kernel<float>, kBlocks, kThreads, 0, stream_, xv, nv, P, rank_, world_);
  else launch(p2p_all_reduce_kernel<bf16>, kBlocks, kThreads, 0, stream_, xv, nv, P, rank_, world_);
  return true;
}

// elementwise.cu's rms_norm_kernel block size for a row of H (the fused kernel must match it).
static int norm_row_threads(int64_t H) { return H >= 4096 ? 512 : H >= 1024 ? 256 : 128; }

template <int kWorld>
static bool launch_add_rms_norm(int kv, Stream st, const float* partial, int T, int H, bf16* residual, const bf16* w,
                                bf16* out, float eps, const Peers& P, int rank) {
  const int threads = norm_row_threads(H);
  if (kv == 1)
    launch(p2p_all_reduce_add_rms_norm_kernel<kWorld, 1>, kBlocks, threads, 0, st, partial, T, H, residual, w, out, eps, P, rank);
  else if (kv == 2)
    launch(p2p_all_reduce_add_rms_norm_kernel<kWorld, 2>, kBlocks, threads, 0, st, partial, T, H, residual, w, out, eps, P, rank);
  else
    return false;
  return true;
}

bool P2pAllReduce::run_add_rms_norm(const float* partial, int64_t T, int64_t H, bf16* residual, const bf16* w, float eps,
                                    bf16* out) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!usable_ || T <= 0 || H <= 0 || H % 8 != 0 || size_t(T * H) * 4 > kMaxBytes || !aligned(partial) ||
      !aligned(residual) || !aligned(w) || !aligned(out))
    return false;
  const int threads = norm_row_threads(H);
  const int kv = int((H / 8 + threads - 1) / threads);  // 8-element groups per thread
  Peers P{};
  for (int r = 0; r < world_; ++r) P.base[r] = peers_[size_t(r)];
  switch (world_) {
    case 2: return launch_add_rms_norm<2>(kv, stream_, partial, int(T), int(H), residual, w, out, eps, P, rank_);
    case 4: return launch_add_rms_norm<4>(kv, stream_, partial, int(T), int(H), residual, w, out, eps, P, rank_);
    case 8: return launch_add_rms_norm<8>(kv, stream_, partial, int(T), int(H), residual, w, out, eps, P, rank_);
    default: return false;
  }
}

}  // namespace nanovllm
