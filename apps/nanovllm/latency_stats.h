// Timing for the benchmarks (bench, bench-serve): a steady clock in seconds, and latency
// distributions: mean and percentiles by linear interpolation between order statistics (numpy's
// default, as vLLM).
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::cli {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Dist {
  double mean = 0, median = 0, p90 = 0, p99 = 0, max = 0;
};

Dist distribution(std::vector<double> v);  // all zero for an empty sample

// out["mean_<name>_ms"], median_, p90_, p99_ from samples in seconds.
void add_dist(nlohmann::json& out, const std::string& name, const std::vector<double>& seconds);

}  // namespace nanovllm::cli
