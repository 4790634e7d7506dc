#include "nanovllm/dist/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "nanovllm/utils/error.h"

namespace nanovllm {

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t b = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(b, i - b));
      b = i + 1;
    }
  if (args.empty()) throw Error("tensor parallel: cannot read /proc/self/cmdline");
  return args;
}

static std::string status_str(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

LocalLauncher::LocalLauncher(const std::vector<int>& ranks,
                             const std::function<std::vector<std::string>(int)>& extra_args,
                             std::vector<std::string> command) {
  const bool self = command.empty();
  const std::vector<std::string> base = self ? own_command_line() : std::move(command);
  const std::string program = self ? "/proc/self/exe" : base[0];
  const pid_t parent = getpid();
  for (int rank : ranks) {
    // Everything the child needs is built before fork(): after it only async-signal-safe calls.
    std::vector<std::string> args = base;
    for (auto& a : extra_args(rank)) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw Error("tensor parallel: fork() failed for rank " + std::to_string(rank));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(kExitRankZeroGone);
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    children_.push_back({rank, pid});
  }
}

LocalLauncher::~LocalLauncher() {
  stop_ = true;
  if (monitor_.joinable()) monitor_.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (auto& c : children_) {
    while (!c.reaped) {
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != 0) {
        c.reaped = true;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        c.reaped = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
}

void LocalLauncher::start_monitor(std::function<void(const std::string&)> on_lost) {
  if (monitor_.joinable() || !on_lost) return;
  on_lost_ = std::move(on_lost);
  monitor_ = std::thread([this] { monitor(); });
}

void LocalLauncher::monitor() {
  while (!stop_) {
    for (auto& c : children_) {
      if (c.reaped) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.reaped = true;
      const bool benign = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == kExitRankZeroGone);
      if (!benign && !stop_) {
        on_lost_("tensor-parallel rank " + std::to_string(c.rank) + " exited (" + status_str(status) + ")");
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace nanovllm
