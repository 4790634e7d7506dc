// Stop-string matching cost per generated token (one choice, ~4-byte deltas as tokens give):
// the filter before issue 44 (every stop string searched on its own at every delta,
// tests/naive_stop_filter.h) against the one-pass Aho-Corasick filter (output/stop_filter.h), for
// 1, 100, 10,000 and ~60,000 stop strings (the last ~1.8 MB, the request), with the
// automaton's build time and size (once per request, shared by its choices).
//
//   stop_bench [--min-seconds S]   (each measurement runs at least S seconds; default 0.3)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "naive_stop_filter.h"
#include "nanovllm/output/stop_filter.h"

using namespace nanovllm;
using Clock = std::chrono::steady_clock;

namespace {

std::string word(std::mt19937& rng, size_t len) {
  std::string w;
  for (size_t i = 0; i < len; ++i) w += char('a' + rng() % 26);
  return w;
}

// Text that often starts stop strings (their first bytes) without completing them: the hold-back
// path runs as it does on real text, and no stop ends the run.
std::vector<std::string> make_deltas(const std::vector<std::string>& stops, std::mt19937& rng, size_t n) {
  std::vector<std::string> d;
  for (size_t i = 0; i < n; ++i) {
    std::string t = " " + stops[rng() % stops.size()].substr(0, 3);
    d.push_back(t);
  }
  return d;
}

// Nanoseconds per delta pushed through a fresh filter made by `make`, repeated for min_s seconds.
template <class Make>
double ns_per_token(Make make, const std::vector<std::string>& deltas, double min_s) {
  size_t tokens = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (elapsed < min_s) {
    auto f = make();
    for (const auto& d : deltas) {
      f.push(d, false);
      if (f.stopped()) std::abort();  // the text is built never to complete a stop string
      ++tokens;
      if ((tokens & 63) == 0 && std::chrono::duration<double>(Clock::now() - t0).count() > 10 * min_s) break;
    }
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return elapsed * 1e9 / double(tokens);
}

}  // namespace

int main(int argc, char** argv) {
  double min_s = 0.3;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) min_s = std::atof(argv[++i]);
  std::printf("%-10s %10s %14s %14s %10s %12s %12s\n", "stops", "bytes", "naive ns/tok", "one-pass ns/tok", "speed-up",
              "build ms", "automaton MB");
  for (size_t k : {size_t(1), size_t(100), size_t(10000), size_t(60000)}) {
    std::mt19937 rng{uint32_t(k)};
    std::vector<std::string> list;
    size_t bytes = 0;
    for (size_t i = 0; i < k; ++i) {
      list.push_back("zq" + word(rng, 28));  // never completed by the text below
      bytes += list.back().size();
    }
    const std::vector<std::string> deltas = make_deltas(list, rng, 2000);
    const auto b0 = Clock::now();
    const Shared<StopStrings> stops = StopStrings(list);
    const double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - b0).count();
    const double naive = ns_per_token([&] { return test::NaiveStopFilter(list, false); }, deltas, min_s);
    const double fast = ns_per_token([&] { return output::StopFilter(stops, false); }, deltas, min_s);
    std::printf("%-10zu %10zu %14.0f %14.0f %9.0fx %12.1f %12.1f\n", k, bytes, naive, fast, naive / fast, build_ms,
                double(stops->automaton().memory_bytes()) / 1e6);
  }
  return 0;
}
