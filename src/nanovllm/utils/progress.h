// A one-line progress bar on stderr (only when stderr is a terminal), showing finished
// requests and the prefill / decode throughput of the latest steps, like nano-vllm's tqdm bar.
#pragma once
#include <cstdint>

namespace nanovllm {

class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled);
  void on_step(bool is_prefill, int64_t tokens, double seconds);
  void on_finished();
  void done();

 private:
  void draw();
  int64_t total_, finished_ = 0;
  bool enabled_;
  double prefill_tps_ = 0, decode_tps_ = 0;
};

}  // namespace nanovllm
