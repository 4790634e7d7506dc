// Starts the local tensor-parallel workers of a single-host (or per-node) run: the process
// re-executes itself (/proc/self/exe with its own command line) once per local worker rank,
// adding the flags returned by extra_args(rank). Workers die with the parent (PR_SET_PDEATHSIG)
// and their stdout goes to /dev/null (rank 0 alone prints results); stderr is shared.
// A monitor thread reaps them: a worker that exits with a failure before shutdown is reported
// through on_lost("tensor-parallel rank R exited (exit code C)").
#pragma once
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace nanovllm {

// A worker that exits because rank 0 went away uses this code: rank 0 is then ending on its
// own (or is dead), so the launcher does not report it as the cause.
constexpr int kExitRankZeroGone = 3;

class LocalLauncher {
 public:
  // `command`: the workers' command line, program first (the Python package runs the nanovllm
  // executable); empty: this process's own, re-executed.
  LocalLauncher(const std::vector<int>& ranks, const std::function<std::vector<std::string>(int)>& extra_args,
                std::vector<std::string> command = {});
  // Waits up to 10 s for the workers to finish (they get the goodbye from rank 0 first), then
  // kills the rest.
  ~LocalLauncher();
  LocalLauncher(const LocalLauncher&) = delete;
  LocalLauncher& operator=(const LocalLauncher&) = delete;

  void start_monitor(std::function<void(const std::string&)> on_lost);

 private:
  void monitor();
  struct Child {
    int rank;
    pid_t pid;
    bool reaped = false;
  };
  std::vector<Child> children_;
  std::atomic<bool> stop_{false};
  std::function<void(const std::string&)> on_lost_;
  std::thread monitor_;
};

// The command line of this process, from /proc/self/cmdline.
std::vector<std::string> own_command_line();

}  // namespace nanovllm
