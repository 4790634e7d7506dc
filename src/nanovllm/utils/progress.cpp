#include "nanovllm/utils/progress.h"

#include <unistd.h>

#include <cstdio>

namespace nanovllm {

ProgressBar::ProgressBar(int64_t total, bool enabled) : total_(total), enabled_(enabled && ::isatty(2)) {}

void ProgressBar::on_step(bool is_prefill, int64_t tokens, double seconds) {
  if (seconds <= 0 || tokens == 0) return;
  (is_prefill ? prefill_tps_ : decode_tps_) = double(tokens) / seconds;
  draw();
}

void ProgressBar::on_finished() {
  ++finished_;
  draw();
}

void ProgressBar::draw() {
  if (!enabled_) return;
  const int width = 30;
  const int filled = total_ ? int(width * finished_ / total_) : width;
  std::fprintf(stderr, "\rGenerating [%.*s%*s] %lld/%lld  prefill %.0f tok/s  decode %.0f tok/s ", filled,
               "##############################", width - filled, "", (long long)finished_, (long long)total_,
               prefill_tps_, decode_tps_);
  std::fflush(stderr);
}

void ProgressBar::done() {
  if (enabled_) std::fprintf(stderr, "\n");
}

}  // namespace nanovllm
