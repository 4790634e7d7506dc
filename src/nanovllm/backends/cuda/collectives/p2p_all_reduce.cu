#include "nanovllm/backends/cuda/collectives/p2p_all_reduce.cuh"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace nanovllm {

using namespace cuda;
using namespace p2p;

namespace {

// x: nv 16-byte vectors of T (float or bf16), summed in place over the world's ranks.
template <class T>
__global__ void __launch_bounds__(kThreads)
    p2p_all_reduce_kernel(uint4* __restrict__ x, int64_t nv, Peers P, int rank, int world) {
  __shared__ uint32_t s_epoch;
  const uint32_t e = claim_call(P, rank, kEpochsOff, &s_epoch);
  pdl_begin();
  const int b = blockIdx.x, tid = threadIdx.x;
  const size_t half = size_t(e & 1) * P2pAllReduce::kMaxBytes;
  const int64_t per = (nv + kBlocks - 1) / kBlocks, lo = b * per, hi = min(nv, lo + per);

  uint4* mine = reinterpret_cast<uint4*>(P.base[rank] + half);
  for (int64_t i = lo + tid; i < hi; i += kThreads) mine[i] = x[i];
  exchange_flags(P, rank, world, e, kFlagsOff);

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
      x[i] = make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]),
                        __float_as_uint(acc[3]));
    else
      x[i] = pack8(acc);
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
    me.ok = cudaMalloc(&mine_, alloc_bytes(world)) == cudaSuccess &&
            cudaMemset(mine_, 0, alloc_bytes(world)) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess &&
            cudaIpcGetMemHandle(&me.handle, mine_) == cudaSuccess;
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
  // Every rank must take the same path: agree on whether all of them mapped all peers, and on
  // the bulk kernel's largest grid (the least of the ranks' GPUs).
  int32_t mine[2] = {int32_t(ok), 0};
  if (ok) {
    try {
      mine[1] = bulk_resident_blocks(world, device);
    } catch (const std::exception&) {  // no throwing before the all-gather: the peers wait in it
      mine[0] = 0;
    }
  }
  std::vector<uint8_t> agree(sizeof mine);
  std::memcpy(agree.data(), mine, sizeof mine);
  const auto every = all_gather(agree);
  if (every.size() != sizeof mine * size_t(world)) throw Error("p2p all-reduce: bad agreement exchange");
  bulk_max_grid_ = 1 << 30;
  for (int r = 0; r < world; ++r) {
    int32_t theirs[2];
    std::memcpy(theirs, every.data() + sizeof mine * size_t(r), sizeof theirs);
    ok = ok && theirs[0];
    bulk_max_grid_ = std::min<int>(bulk_max_grid_, theirs[1]);
  }
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
  if (!usable_ || esize == 0 || n <= 0 || bytes > kMaxBytes || bytes % 16 != 0 || !aligned16({x})) return false;
  Peers P{};
  for (int r = 0; r < world_; ++r) P.base[r] = peers_[size_t(r)];
  auto* xv = static_cast<uint4*>(x);
  const int64_t nv = int64_t(bytes / 16);
  if (dt == DType::F32)
    launch(p2p_all_reduce_kernel<float>, kBlocks, kThreads, 0, stream_, xv, nv, P, rank_, world_);
  else
    launch(p2p_all_reduce_kernel<bf16>, kBlocks, kThreads, 0, stream_, xv, nv, P, rank_, world_);
  return true;
}

bool P2pAllReduce::run_add_rms_norm(const float* partial, int64_t T, int64_t H, bf16* residual, const bf16* w,
                                    float eps, bf16* out) {
  if (!usable_ || T <= 0 || H <= 0 || H % 8 != 0 || T > (int64_t(1) << 30) || H > (int64_t(1) << 20) ||
      !aligned16({partial, residual, w, out}))
    return false;
  Peers P{};
  for (int r = 0; r < world_; ++r) P.base[r] = peers_[size_t(r)];
  return launch_all_reduce_add_rms_norm(P, world_, rank_, stream_, bulk_max_grid_, partial, int(T), int(H), residual, w,
                                        eps, out);
}

}  // namespace nanovllm
