#include "latency_stats.h"

#include <algorithm>

namespace nanovllm::cli {

Dist distribution(std::vector<double> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    const double pos = p * double(v.size() - 1);
    const size_t lo = size_t(pos), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / double(v.size());
  d.median = q(0.5);
  d.p90 = q(0.9);
  d.p99 = q(0.99);
  d.max = v.back();
  return d;
}

void add_dist(nlohmann::json& out, const std::string& name, const std::vector<double>& seconds) {
  const Dist d = distribution(seconds);
  out["mean_" + name + "_ms"] = d.mean * 1e3;
  out["median_" + name + "_ms"] = d.median * 1e3;
  out["p90_" + name + "_ms"] = d.p90 * 1e3;
  out["p99_" + name + "_ms"] = d.p99 * 1e3;
}

}  // namespace nanovllm::cli
