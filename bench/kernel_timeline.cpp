// Kernel timeline of CUDA-graph replays (decode steps), measured with CUPTI and summarized at exit.
//
// Why: ncu times kernels one by one with caches flushed and without PDL, which overstates small
// kernels; inside a graph replay with programmatic dependent launch, consecutive kernels overlap.
// What matters for the step time is how much each kernel pushes the end of the step: its
// *increment* = end_i - end_{i-1} (kernels of one stream end in order). This library records every
// kernel of every graph launch (CUPTI concurrent-kernel activity), takes the graph launched most
// often (the decode graph of the batch size being measured), drops its first replays (warm-up), and
// prints per kernel name: calls per replay, mean duration and mean increment per replay, plus the
// idle time between replays (host work: scheduling, input upload, the sampler's sync).
//
// Usage (a CUDA injection library; nothing in the engine knows about it):
//   CUDA_INJECTION64_PATH=build-gpu/libnanovllm_kernel_timeline.so NANOVLLM_TIMELINE_OUT=/tmp/tl
//     nanovllm bench ... --latency
// writes /tmp/tl.<pid>.txt per process (one per tensor-parallel rank); stderr without the variable.
// NANOVLLM_TIMELINE_SKIP (default 5): replays dropped at the start; NANOVLLM_TIMELINE_SEQ (default
// 0): also print the first N kernels of a replay in order, each with its mean increment, its start
// relative to the previous kernel's end (negative: launched early under PDL) and its duration.
// Kernels launched outside graphs (eager prefill) are summarized first: per kernel name, calls,
// total and mean duration, and the GPU time they span (first start to last end).
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start, end;   // ns, GPU timestamps
  uint32_t correlation;  // the API call that launched it: one graph launch for all its kernels
  uint32_t graph;        // 0 outside graphs
  uint32_t name;         // index into Timeline::names
  int32_t grid;          // gridX * gridY * gridZ
};

// Process-wide by necessity: CUPTI's buffer callbacks are plain function pointers without a user
// argument, and the driver calls InitializeInjection once per process.
struct Timeline {
  std::mutex mu;
  std::vector<KernelRecord> records;
  std::vector<std::string> names;
  std::unordered_map<const char*, uint32_t> name_of_ptr;  // CUPTI keeps each name string alive
};
Timeline& timeline() {
  static Timeline* t = new Timeline;  // leaked on purpose: used from atexit
  return *t;
}

std::string short_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string s = status == 0 && d ? d.get() : mangled;
  for (size_t p; (p = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(p, 23);
  if (auto p = s.find('('); p != std::string::npos) s.resize(p);  // drop the parameter list
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  if (auto p = s.find("nanovllm::"); p != std::string::npos) s.erase(p, 10);
  return s.size() > 90 ? s.substr(0, 90) : s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 8u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
    auto [it, fresh] = t.name_of_ptr.try_emplace(k->name, static_cast<uint32_t>(t.names.size()));
    if (fresh) t.names.push_back(short_name(k->name));
    t.records.push_back({k->start, k->end, k->correlationId, k->graphId, it->second, k->gridX * k->gridY * k->gridZ});
  }
  std::free(buffer);
}

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// One graph launch: its kernels sorted by start.
using Replay = std::vector<const KernelRecord*>;

// Kernels outside graphs (eager steps such as a long prefill): per name, calls and summed duration.
void summarize_eager(FILE* out) {
  Timeline& t = timeline();
  std::map<uint32_t, std::pair<long, double>> per_name;  // name -> (calls, ns)
  uint64_t first = UINT64_MAX, last = 0;
  double busy = 0;
  for (const auto& r : t.records) {
    if (r.graph != 0) continue;
    auto& [calls, ns] = per_name[r.name];
    ++calls;
    ns += double(r.end - r.start);
    busy += double(r.end - r.start);
    first = std::min(first, r.start);
    last = std::max(last, r.end);
  }
  if (per_name.empty()) return;
  std::fprintf(out, "eager kernels: %.1f ms of kernel time within a %.1f ms span\n", busy * 1e-6,
               double(last - first) * 1e-6);
  std::vector<std::pair<uint32_t, std::pair<long, double>>> rows(per_name.begin(), per_name.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.second > b.second.second; });
  std::fprintf(out, "%11s %6s %9s %11s  %s\n", "total ms", "%", "calls", "us/call", "kernel");
  for (auto& [name, cd] : rows)
    std::fprintf(out, "%11.2f %5.1f%% %9ld %11.2f  %s\n", cd.second * 1e-6, 100.0 * cd.second / busy, cd.first,
                 cd.second * 1e-3 / double(cd.first), t.names[name].c_str());
}

void summarize(FILE* out) {
  Timeline& t = timeline();
  summarize_eager(out);
  std::map<uint32_t, Replay> by_launch;  // correlation id -> kernels
  std::map<uint32_t, int> launches_of_graph;
  for (const auto& r : t.records)
    if (r.graph != 0) by_launch[r.correlation].push_back(&r);
  for (auto& [c, ks] : by_launch) ++launches_of_graph[ks.front()->graph];
  if (launches_of_graph.empty()) {
    std::fprintf(out, "kernel timeline: no graph launches among %zu kernels\n", t.records.size());
    return;
  }
  const uint32_t graph = std::max_element(launches_of_graph.begin(), launches_of_graph.end(), [](auto& a, auto& b) {
                           return a.second < b.second;
                         })->first;
  std::vector<Replay> replays;
  for (auto& [c, ks] : by_launch) {
    if (ks.front()->graph != graph) continue;
    std::sort(ks.begin(), ks.end(), [](auto* a, auto* b) { return a->start < b->start; });
    replays.push_back(ks);
  }
  std::sort(replays.begin(), replays.end(), [](auto& a, auto& b) { return a.front()->start < b.front()->start; });
  const size_t skip = static_cast<size_t>(std::max(0L, env_long("NANOVLLM_TIMELINE_SKIP", 5)));
  if (replays.size() <= skip + 1) {
    std::fprintf(out, "kernel timeline: graph %u has only %zu replays\n", graph, replays.size());
    return;
  }
  // Per name: summed duration and increment over the measured replays; per position: increment.
  struct Acc {
    double dur = 0, inc = 0;
    long calls = 0;
  };
  std::map<std::pair<uint32_t, int32_t>, Acc> per_name;  // (name, grid)
  std::vector<double> inc_at, start_at, dur_at;          // per position: increment; start - previous end; duration
  double span = 0;
  std::vector<double> idle;  // per replay; the median, since a prefill between two replays is not a step
  size_t n = 0, kernels = replays[skip].size();
  for (size_t i = skip; i + 1 < replays.size(); ++i) {  // the last replay has no successor
    const Replay& ks = replays[i];
    if (ks.size() != kernels) continue;  // a different capture of the same graph id: skip
    uint64_t prev_end = ks.front()->start;
    for (size_t j = 0; j < ks.size(); ++j) {
      const double inc = ks[j]->end > prev_end ? double(ks[j]->end - prev_end) : 0.0;
      const uint64_t prev_end_before = prev_end;
      prev_end = std::max(prev_end, ks[j]->end);
      const double dur = double(ks[j]->end - ks[j]->start);
      Acc& a = per_name[{ks[j]->name, ks[j]->grid}];
      a.dur += dur;
      a.inc += inc;
      ++a.calls;
      if (inc_at.size() <= j) {
        inc_at.resize(j + 1, 0.0);
        start_at.resize(j + 1, 0.0);
        dur_at.resize(j + 1, 0.0);
      }
      inc_at[j] += inc;
      start_at[j] += double(ks[j]->start) - double(j == 0 ? ks[j]->start : prev_end_before);
      dur_at[j] += dur;
    }
    span += double(prev_end - ks.front()->start);
    idle.push_back(double(replays[i + 1].front()->start) - double(prev_end));
    ++n;
  }
  const double us = 1e-3 / double(n);  // ns summed over n replays -> us per replay
  std::fprintf(out, "kernel timeline: graph %u, %zu replays measured (of %zu), %zu kernels each\n", graph, n,
               replays.size(), kernels);
  std::nth_element(idle.begin(), idle.begin() + long(idle.size() / 2), idle.end());
  const double idle_us = idle[idle.size() / 2] * 1e-3;
  std::fprintf(out, "per replay: GPU span %.1f us, idle before the next replay %.1f us (median), step %.1f us\n",
               span * us, idle_us, span * us + idle_us);
  std::vector<std::pair<std::pair<uint32_t, int32_t>, Acc>> rows(per_name.begin(), per_name.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.inc > b.second.inc; });
  std::fprintf(out, "%9s %6s %9s %9s %9s  %s\n", "inc us", "inc %", "calls", "dur/call", "inc/call", "kernel [grid]");
  for (auto& [key, a] : rows) {
    const double calls = double(a.calls) / double(n);
    std::fprintf(out, "%9.1f %5.1f%% %9.1f %9.2f %9.2f  %s [%d]\n", a.inc * us, 100.0 * a.inc / span, calls,
                 a.dur * us / calls, a.inc * us / calls, t.names[key.first].c_str(), key.second);
  }
  const size_t seq =
      std::min<size_t>(inc_at.size(), static_cast<size_t>(std::max(0L, env_long("NANOVLLM_TIMELINE_SEQ", 0))));
  for (size_t j = 0; j < seq; ++j)
    std::fprintf(out, "  #%-4zu inc %7.2f us  start %+7.2f  dur %7.2f  %s [%d]\n", j, inc_at[j] * us, start_at[j] * us,
                 dur_at[j] * us, t.names[replays[skip][j]->name].c_str(), replays[skip][j]->grid);
}

void at_exit() {
  cuptiActivityFlushAll(1);
  const char* prefix = std::getenv("NANOVLLM_TIMELINE_OUT");
  FILE* out = stderr;
  if (prefix && *prefix) {
    const std::string path = std::string(prefix) + "." + std::to_string(getpid()) + ".txt";
    out = std::fopen(path.c_str(), "w");
    if (!out) out = stderr;
  }
  std::lock_guard<std::mutex> lock(timeline().mu);
  summarize(out);
  if (out != stderr) std::fclose(out);
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel timeline: CUPTI activity tracing could not be enabled\n");
    return 0;
  }
  std::atexit(at_exit);
  return 1;
}
