// RequestPool (server/request_pool.h): jobs run on the pool's threads and their results (or
// exceptions) come back to the awaiting coroutine on its own executor; past the queue bound a
// job is refused at once with a 503.
#ifndef NANOVLLM_NO_HTTP_SERVER
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "nanovllm/server/api_error.h"
#include "nanovllm/server/request_pool.h"

using namespace nanovllm::server;

TEST(RequestPool, RunsOffTheCallersThreadAndResumesOnIt) {
  RequestPool pool(2, 4);
  net::io_context ioc;
  const auto io_thread = std::this_thread::get_id();
  std::thread::id job_thread, resumed_thread;
  int result = 0;
  std::string error;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        auto job = [&] {
          job_thread = std::this_thread::get_id();
          return 42;
        };
        result = co_await pool.run(job);
        resumed_thread = std::this_thread::get_id();
        auto failing = []() -> int { throw std::runtime_error("bad template"); };
        try {
          co_await pool.run(failing);
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
      },
      net::detached);
  ioc.run();
  EXPECT_EQ(result, 42);
  EXPECT_NE(job_thread, io_thread);
  EXPECT_EQ(resumed_thread, io_thread);
  EXPECT_EQ(error, "bad template");
  EXPECT_EQ(pool.in_flight(), 0);
}

TEST(RequestPool, FullQueueIsA503) {
  RequestPool pool(1, 1);  // one running, one waiting
  net::io_context ioc;
  std::atomic<bool> release{false};
  int done = 0, refused = 0;
  std::string message;
  for (int i = 0; i < 5; ++i)
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
          auto job = [&] {
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return 1;
          };
          try {
            done += co_await pool.run(job);
          } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 503);
            message = e.what();
            ++refused;
            if (refused == 3) release = true;
          }
        },
        net::detached);
  ioc.run();
  EXPECT_EQ(done, 2);
  EXPECT_EQ(refused, 3);
  EXPECT_NE(message.find("--max-queued-requests"), std::string::npos) << message;
  EXPECT_EQ(pool.in_flight(), 0);
}
#endif
