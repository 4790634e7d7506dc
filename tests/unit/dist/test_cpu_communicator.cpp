// The CPU communicator's collectives with 2, 3 and 4 ranks as threads: every rank gets the sum
// (in rank order) and the rank-major stack of all pieces.
#include <gtest/gtest.h>

#include <future>

#include "nanovllm/dist/socket.h"
#include "nanovllm/dist/tp_group.h"

using namespace nanovllm;

namespace {

struct RankResult {
  std::vector<float> reduced, gathered;
};

// Rank r's values: x[i] = r * 1000 + i (+ 0.25 for the reduce).
RankResult run_rank(int port, int rank, int world, int64_t rows, int64_t cols) {
  RendezvousOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world = world;
  o.timeout_s = 20;
  TpGroup g(o, true);
  auto be = make_cpu_backend(1);
  auto comm = g.make_communicator(*be);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->world_size(), world);
  Tensor x = be->empty({rows, cols}, DType::F32);
  for (int64_t i = 0; i < rows * cols; ++i) x.data<float>()[i] = float(rank * 1000 + i) + 0.25f;
  Tensor piece = be->empty({rows, cols}, DType::F32);
  std::copy(x.data<float>(), x.data<float>() + rows * cols, piece.data<float>());
  comm->all_reduce_sum(x);
  Tensor out = be->empty({world, rows, cols}, DType::F32);
  comm->all_gather(piece, out);
  RankResult r;
  r.reduced = be->to_host_f32(x);
  r.gathered = be->to_host_f32(out);
  return r;
}

}  // namespace

TEST(CpuCommunicator, AllReduceAndAllGather) {
  for (int world : {2, 3, 4}) {
    const int port = pick_free_port("127.0.0.1");
    const int64_t rows = 3, cols = 5, n = rows * cols;
    std::vector<std::future<RankResult>> ranks;
    for (int r = 0; r < world; ++r)
      ranks.push_back(std::async(std::launch::async, run_rank, port, r, world, rows, cols));
    for (int r = 0; r < world; ++r) {
      RankResult got = ranks[size_t(r)].get();
      ASSERT_EQ(got.reduced.size(), size_t(n));
      ASSERT_EQ(got.gathered.size(), size_t(world * n));
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int q = 0; q < world; ++q) want += float(q * 1000 + i) + 0.25f;
        EXPECT_EQ(got.reduced[size_t(i)], want) << "world " << world << " rank " << r << " i " << i;
      }
      for (int q = 0; q < world; ++q)
        for (int64_t i = 0; i < n; ++i)
          EXPECT_EQ(got.gathered[size_t(q * n + i)], float(q * 1000 + i) + 0.25f) << "world " << world << " rank " << r;
    }
  }
}

TEST(CpuCommunicator, RefusesMisShapedGather) {
  const int port = pick_free_port("127.0.0.1");
  auto worker = std::async(std::launch::async, [=] {
    RendezvousOptions o;
    o.master_port = port;
    o.rank = 1;
    o.world = 2;
    TpGroup g(o, true);
  });
  RendezvousOptions o;
  o.master_port = port;
  o.world = 2;
  TpGroup g(o, true);
  worker.get();
  auto be = make_cpu_backend(1);
  auto comm = g.make_communicator(*be);
  Tensor in = be->empty({2, 3}, DType::F32), out = be->empty({3, 2, 3}, DType::F32);
  EXPECT_THROW(comm->all_gather(in, out), Error);
}
