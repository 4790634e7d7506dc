// The tensor-parallel control channel over TCP, with ranks as threads of one process:
// rendezvous, broadcast/receive, all_min, and that a dead or silent peer gives an error within a
// bounded time instead of a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "nanovllm/dist/socket.h"
#include "nanovllm/dist/tp_group.h"

using namespace nanovllm;
using Clock = std::chrono::steady_clock;

namespace {

RendezvousOptions opts(int port, int rank, int world, double timeout = 20) {
  RendezvousOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world = world;
  o.timeout_s = timeout;
  return o;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST(ControlChannel, BroadcastReceiveAndMinOverThreeRanks) {
  const int port = pick_free_port("127.0.0.1"), world = 3;
  std::vector<std::future<std::vector<int64_t>>> workers;
  for (int r = 1; r < world; ++r)
    workers.push_back(std::async(std::launch::async, [=] {
      TpGroup g(opts(port, r, world), false);
      if (r == 2) g.set_receive_spin(0.05);  // a GPU worker's setting: the same messages arrive
      std::vector<int64_t> seen;
      while (true) {
        auto m = g.receive();
        if (m.empty()) break;  // goodbye
        seen.push_back(int64_t(m.size()) * 1000 + m.back());
      }
      seen.push_back(g.all_min(100 + r));
      return seen;
    }));
  TpGroup g(opts(port, 0, world), false);
  EXPECT_THROW(g.set_receive_spin(0.05), Error);  // rank 0 receives no broadcasts
  g.broadcast({1, 2, 3});
  g.broadcast(std::vector<uint8_t>(100000, 7));  // larger than a socket buffer
  g.goodbye();
  EXPECT_EQ(g.all_min(105), 101);
  for (auto& w : workers) EXPECT_EQ(w.get(), (std::vector<int64_t>{3003, 100000007, 101}));
}

TEST(ControlChannel, DeadWorkerIsReportedAtOnce) {
  const int port = pick_free_port("127.0.0.1");
  auto worker = std::async(std::launch::async, [=] { TpGroup g(opts(port, 1, 2), false); });  // joins, then leaves
  TpGroup g(opts(port, 0, 2), false);
  worker.get();
  const auto t0 = Clock::now();
  try {
    g.all_min(1);
    FAIL() << "no error for a dead worker";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel rank 1 exited"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.0);
}

TEST(ControlChannel, WorkerSeesRankZeroGo) {
  const int port = pick_free_port("127.0.0.1");
  auto worker = std::async(std::launch::async, [=] {
    TpGroup g(opts(port, 1, 2), false);
    return g.receive();
  });
  { TpGroup g(opts(port, 0, 2), false); }  // rank 0 exits without goodbye
  EXPECT_THROW(worker.get(), PeerLostError);
}

TEST(ControlChannel, WatchdogReportsAClosedPeer) {
  const int port = pick_free_port("127.0.0.1");
  std::promise<void> leave;
  auto worker = std::async(std::launch::async, [&, port] {
    TpGroup g(opts(port, 1, 2), false);
    leave.get_future().wait();
  });
  TpGroup g(opts(port, 0, 2), false);
  std::promise<std::string> lost;
  g.start_watchdog([&](const std::string& what) { lost.set_value(what); });
  const auto t0 = Clock::now();
  leave.set_value();
  worker.get();
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(3)), std::future_status::ready) << "watchdog did not notice";
  EXPECT_EQ(f.get(), "tensor-parallel rank 1 exited (connection closed)");
  EXPECT_LT(seconds_since(t0), 3.0);
}

TEST(ControlChannel, GoodbyeRaisesNoAlarm) {
  const int port = pick_free_port("127.0.0.1");
  std::atomic<int> alarms{0};
  auto worker = std::async(std::launch::async, [&, port] {
    TpGroup g(opts(port, 1, 2), false);
    g.start_watchdog([&](const std::string&) { ++alarms; });
    EXPECT_TRUE(g.receive().empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // rank 0 is gone by now
  });
  {
    TpGroup g(opts(port, 0, 2), false);
    g.start_watchdog([&](const std::string&) { ++alarms; });
    g.goodbye();
  }
  worker.get();
  EXPECT_EQ(alarms.load(), 0);
}

TEST(ControlChannel, SilentPeerTimesOut) {
  Socket listener = Socket::listen("127.0.0.1", 0);
  Socket client = Socket::connect("127.0.0.1", listener.local_port(), 5, "test peer");
  Socket server = listener.accept(5, "test client");
  const auto t0 = Clock::now();
  char c;
  EXPECT_THROW(server.recv_all(&c, 1, 0.3), Error);
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_FALSE(server.peer_closed());
  client.close();
  EXPECT_TRUE(server.peer_closed());
}

// A spinning receive (TP workers between steps) still gets messages that arrive during and after
// its spin, keeps a timeout shorter than the spin, and still sees a closed peer.
TEST(ControlChannel, SpinningReceiveKeepsDataTimeoutsAndPeerLoss) {
  Socket listener = Socket::listen("127.0.0.1", 0);
  Socket client = Socket::connect("127.0.0.1", listener.local_port(), 5, "test peer");
  Socket server = listener.accept(5, "test client");
  server.set_spin(1.0);
  std::thread sender([&] {
    client.send_msg({1, 2, 3});  // during the spin
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    client.send_msg({4});  // after it: the receive has gone to sleep in poll()
  });
  EXPECT_EQ(server.recv_msg(5), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(server.recv_msg(5), (std::vector<uint8_t>{4}));
  sender.join();
  auto t0 = Clock::now();
  char c;
  EXPECT_THROW(server.recv_all(&c, 1, 0.05), Error);  // the 0.05 s timeout wins over the 1 s spin
  EXPECT_LT(seconds_since(t0), 0.6);
  client.close();
  t0 = Clock::now();
  EXPECT_THROW(server.recv_msg(5), PeerLostError);
  EXPECT_LT(seconds_since(t0), 1.0);
}

TEST(Rendezvous, RefusesMismatchedSizesAndMissingRanks) {
  const int port = pick_free_port("127.0.0.1");
  auto worker = std::async(std::launch::async, [=] {
    try {
      TpGroup g(opts(port, 1, 3, 5), false);  // says 3 ranks
    } catch (const Error&) {}
  });
  try {
    TpGroup g(opts(port, 0, 2, 5), false);
    FAIL() << "mismatched sizes accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--tensor-parallel-size 3 but rank 0 with 2"), std::string::npos) << e.what();
  }
  worker.get();
  const auto t0 = Clock::now();
  EXPECT_THROW(TpGroup(opts(pick_free_port("127.0.0.1"), 0, 2, 0.5), false), Error);  // nobody comes
  EXPECT_THROW(TpGroup(opts(pick_free_port("127.0.0.1"), 1, 2, 0.5), false), Error);  // no rank 0
  EXPECT_LT(seconds_since(t0), 5.0);
}
