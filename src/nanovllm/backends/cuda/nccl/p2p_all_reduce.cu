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
constexpr size_t kAllocBytes = kEpochsOff + sizeof(uint32_t) * kBlocks;

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

// x: nv 16-byte vectors of T (float or bf16), summed in place over the world's ranks.
template <class T>
__global__ void __launch_bounds__(kThreads) p2p_all_reduce_kernel(uint4* __restrict__ x, int64_t nv, Peers P,
                                                                   int rank, int world) {
  __shared__ uint32_t s_epoch;
  pdl_begin();
  const int b = blockIdx.x, tid = threadIdx.x;
  uint32_t* epochs = reinterpret_cast<uint32_t*>(P.base[rank] + kEpochsOff);
  if (tid == 0) s_epoch = epochs[b] + 1;
  __syncthreads();
  const uint32_t e = s_epoch;
  const size_t half = size_t(e & 1) * P2pAllReduce::kMaxBytes;
  const int64_t per = (nv + kBlocks - 1) / kBlocks, lo = b * per, hi = min(nv, lo + per);

  uint4* mine = reinterpret_cast<uint4*>(P.base[rank] + half);
  for (int64_t i = lo + tid; i < hi; i += kThreads) mine[i] = x[i];
  __syncthreads();  // the block's part is written; thread r signals rank r, then waits for it
  if (tid < world) {
    __threadfence_system();
    store_release_sys(reinterpret_cast<uint32_t*>(P.base[tid] + kFlagsOff) + b * P2pAllReduce::kMaxRanks + rank, e);
    const uint32_t* flag = reinterpret_cast<const uint32_t*>(P.base[rank] + kFlagsOff) + b * P2pAllReduce::kMaxRanks + tid;
    const uint64_t t0 = global_ns();
    while (int32_t(load_acquire_sys(flag) - e) < 0)
      if (global_ns() - t0 > 30ull * 1000 * 1000 * 1000) __trap();  // a peer is gone
  }
  __syncthreads();

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
  if (tid == 0) epochs[b] = e;
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

}  // namespace nanovllm
