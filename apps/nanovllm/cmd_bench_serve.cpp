// `nanovllm bench-serve`: the serving benchmark (as `vllm bench serve`): sends streamed completion
// requests to a running OpenAI-compatible server with Poisson arrivals at --request-rate (or all at
// once), from a random dataset (--random-input-len token ids, --random-output-len tokens with
// ignore_eos) or a JSONL file, and reports request and token throughput and the TTFT, TPOT
// (time per output token after the first), ITL (gaps between streamed tokens) and end-to-end
// latency distributions: mean, median, p90, p99. A table on stdout, then one JSON line (also written
// to --result-json). One thread per request in flight (--max-concurrency caps them).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "latency_stats.h"
#include "nanovllm/utils/error.h"
#include "sse_client.h"

namespace nanovllm::cli {
namespace {

struct BenchServeArgs {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;  // default: the first model of GET /v1/models
  std::string api_key;
  std::string dataset_name = "random";
  std::string dataset_path;
  int64_t num_prompts = 1000;
  double request_rate = std::numeric_limits<double>::infinity();
  int64_t max_concurrency = 0;  // 0: no cap
  int64_t random_input_len = 1024, random_output_len = 128;
  double random_range_ratio = 0;
  int64_t random_vocab_size = 32000;
  uint64_t seed = 0;
  double timeout_s = 600;
  std::string result_json;
};

struct Request {
  nlohmann::json prompt;   // token ids or text
  int64_t prompt_len = 0;  // token ids given (text: counted by the server's usage)
  int64_t output_len = 0;
};

std::vector<Request> random_requests(const BenchServeArgs& a, std::mt19937_64& rng) {
  if (a.random_input_len < 1 || a.random_output_len < 1)
    throw UserError("--random-input-len and --random-output-len must be at least 1");
  if (a.random_range_ratio < 0 || a.random_range_ratio >= 1) throw UserError("--random-range-ratio must be in [0, 1)");
  if (a.random_vocab_size < 1) throw UserError("--random-vocab-size must be at least 1");
  // As vLLM's random dataset: lengths uniform in [len * (1 - r), len * (1 + r)].
  auto length = [&](int64_t len) {
    const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(len) * (1 - a.random_range_ratio))));
    const int64_t hi = std::max<int64_t>(lo, int64_t(std::ceil(double(len) * (1 + a.random_range_ratio))));
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::uniform_int_distribution<int64_t> token(0, a.random_vocab_size - 1);
  std::vector<Request> reqs(size_t(a.num_prompts));
  for (auto& r : reqs) {
    r.prompt_len = length(a.random_input_len);
    r.output_len = length(a.random_output_len);
    r.prompt = nlohmann::json::array();
    for (int64_t i = 0; i < r.prompt_len; ++i) r.prompt.push_back(token(rng));
  }
  return reqs;
}

// JSONL: {"prompt": "text" | [token ids], "max_tokens": N (default --random-output-len)} per line;
// the first --num-prompts lines, cycled when the file has fewer.
std::vector<Request> jsonl_requests(const BenchServeArgs& a) {
  std::ifstream in(a.dataset_path);
  if (!in) throw UserError("--dataset-path " + a.dataset_path + ": cannot open");
  std::vector<Request> file;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = a.dataset_path + ":" + std::to_string(n);
    if (j.is_discarded() || !j.is_object()) throw UserError(where + ": not a JSON object");
    Request r;
    const auto p = j.find("prompt");
    if (p == j.end() || !(p->is_string() || (p->is_array() && !p->empty())))
      throw UserError(where + ": 'prompt' must be a string or a non-empty list of token ids");
    r.prompt = *p;
    r.prompt_len = p->is_array() ? int64_t(p->size()) : 0;
    const auto m = j.find("max_tokens");
    if (m != j.end() && !(m->is_number_integer() && m->get<int64_t>() >= 1))
      throw UserError(where + ": 'max_tokens' must be a positive integer");
    r.output_len = m != j.end() ? m->get<int64_t>() : a.random_output_len;
    file.push_back(std::move(r));
  }
  if (file.empty()) throw UserError("--dataset-path " + a.dataset_path + ": no requests");
  std::vector<Request> reqs;
  for (int64_t i = 0; i < a.num_prompts; ++i) reqs.push_back(file[size_t(i) % file.size()]);
  return reqs;
}

void print_report(const nlohmann::json& r) {
  auto row = [](const char* label, double v, int prec) { std::printf("%-40s %.*f\n", label, prec, v); };
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-40s %lld\n", "Successful requests:", (long long)r["completed"].get<int64_t>());
  std::printf("%-40s %lld\n", "Failed requests:", (long long)r["failed"].get<int64_t>());
  row("Benchmark duration (s):", r["duration"].get<double>(), 2);
  std::printf("%-40s %lld\n", "Total input tokens:", (long long)r["total_input_tokens"].get<int64_t>());
  std::printf("%-40s %lld\n", "Total generated tokens:", (long long)r["total_output_tokens"].get<int64_t>());
  row("Request throughput (req/s):", r["request_throughput"].get<double>(), 2);
  row("Output token throughput (tok/s):", r["output_throughput"].get<double>(), 2);
  row("Total token throughput (tok/s):", r["total_token_throughput"].get<double>(), 2);
  struct Section {
    const char *key, *label, *title;  // JSON key part, table label, section title
  };
  const Section sections[] = {{"ttft", "TTFT", "Time to First Token"},
                              {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
                              {"itl", "ITL", "Inter-token Latency"},
                              {"e2el", "E2EL", "End-to-end Latency"}};
  const char* stats[][2] = {{"mean", "Mean"}, {"median", "Median"}, {"p90", "P90"}, {"p99", "P99"}};
  for (const Section& sec : sections) {
    const int pad = 48 - int(std::strlen(sec.title));
    std::printf("%s%s%s\n", std::string(std::max(0, pad / 2), '-').c_str(), sec.title,
                std::string(std::max(0, (pad + 1) / 2), '-').c_str());
    for (const auto& st : stats) {
      const std::string label = std::string(st[1]) + " " + sec.label + " (ms):";
      row(label.c_str(), r[std::string(st[0]) + "_" + sec.key + "_ms"].get<double>(), 2);
    }
  }
  std::printf("==================================================\n");
}

void run(const BenchServeArgs& a) {
  if (a.num_prompts < 1) throw UserError("--num-prompts must be at least 1");
  if (!(a.request_rate > 0)) throw UserError("--request-rate must be positive (inf: all requests at once)");
  if (a.max_concurrency < 0) throw UserError("--max-concurrency must be 0 (no cap) or positive");
  if (!(a.timeout_s > 0)) throw UserError("--timeout must be positive");
  HttpEndpoint ep = HttpEndpoint::parse(a.base_url);
  ep.api_key = a.api_key;
  ep.timeout_s = a.timeout_s;
  std::string model = a.model;
  if (model.empty()) {
    const auto models = nlohmann::json::parse(http_get(ep, "/v1/models"), nullptr, false);
    if (models.is_discarded() || !models.contains("data") || !models["data"].is_array() || models["data"].empty())
      throw UserError("GET /v1/models gave no model; pass --model");
    model = models["data"][0].value("id", "");
  }
  if (a.dataset_name == "jsonl" && a.dataset_path.empty()) throw UserError("--dataset-name jsonl needs --dataset-path");
  std::mt19937_64 rng(a.seed);
  std::vector<Request> reqs;
  if (a.dataset_name == "random")
    reqs = random_requests(a, rng);
  else if (a.dataset_name == "jsonl")
    reqs = jsonl_requests(a);
  else
    throw UserError("--dataset-name must be random or jsonl, got '" + a.dataset_name + "'");

  // Arrival offsets: exponential gaps (a Poisson process) at the rate, or all at zero.
  std::vector<double> arrival(reqs.size(), 0.0);
  if (std::isfinite(a.request_rate)) {
    std::exponential_distribution<double> gap(a.request_rate);
    double t = 0;
    for (auto& x : arrival) {
      x = t;
      t += gap(rng);
    }
  }
  std::vector<StreamTiming> results(reqs.size());
  const int64_t cap = a.max_concurrency > 0 ? a.max_concurrency : int64_t(reqs.size());
  std::counting_semaphore<> slots(std::ptrdiff_t(std::min<int64_t>(cap, std::numeric_limits<int32_t>::max())));
  std::vector<std::thread> threads;
  threads.reserve(reqs.size());
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(arrival[i])));
    slots.acquire();
    nlohmann::json body = {{"model", model},
                           {"prompt", reqs[i].prompt},
                           {"max_tokens", reqs[i].output_len},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    threads.emplace_back([&, i, body = body.dump()] {
      results[i] = stream_completion(ep, a.endpoint, body);
      slots.release();
    });
  }
  for (auto& t : threads) t.join();
  const double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, input_tokens = 0, output_tokens = 0;
  nlohmann::json errors = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const StreamTiming& r = results[i];
    if (!r.ok) {
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ++completed;
    input_tokens += r.prompt_tokens > 0 ? r.prompt_tokens : reqs[i].prompt_len;
    output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.latency_s);
    if (r.output_tokens > 1) tpot.push_back((r.latency_s - r.ttft_s) / double(r.output_tokens - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  nlohmann::json out = {{"bench", "serve"},
                        {"model", model},
                        {"base_url", a.base_url},
                        {"num_prompts", a.num_prompts},
                        {"request_rate", std::isfinite(a.request_rate) ? nlohmann::json(a.request_rate) : "inf"},
                        {"max_concurrency", a.max_concurrency},
                        {"completed", completed},
                        {"failed", int64_t(results.size()) - completed},
                        {"duration", duration},
                        {"total_input_tokens", input_tokens},
                        {"total_output_tokens", output_tokens},
                        {"request_throughput", double(completed) / duration},
                        {"output_throughput", double(output_tokens) / duration},
                        {"total_token_throughput", double(input_tokens + output_tokens) / duration},
                        {"errors", errors}};
  add_dist(out, "ttft", ttft);
  add_dist(out, "tpot", tpot);
  add_dist(out, "itl", itl);
  add_dist(out, "e2el", e2el);
  print_report(out);
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  if (!a.result_json.empty()) {
    std::ofstream f(a.result_json);
    if (!(f << out.dump(2) << "\n")) throw UserError("--result-json " + a.result_json + ": cannot write");
  }
  if (completed == 0) throw Error("bench-serve: every request failed; first error: " + errors[0].get<std::string>());
}

}  // namespace

void add_bench_serve(CLI::App& app) {
  auto a = std::make_shared<BenchServeArgs>();
  auto* cmd = app.add_subcommand(
      "bench-serve", "serving benchmark against a running server; also spelled `bench serve`, as vllm bench serve");
  cmd->add_option("--base-url", a->base_url, "server address, http://HOST:PORT");
  cmd->add_option("--endpoint", a->endpoint, "completions path (default /v1/completions)");
  cmd->add_option("--model", a->model, "model name in the requests (default: the server's first)");
  cmd->add_option("--api-key", a->api_key, "sent as a Bearer token");
  cmd->add_option("--dataset-name", a->dataset_name, "random | jsonl");
  cmd->add_option("--dataset-path", a->dataset_path, "jsonl: one {\"prompt\", \"max_tokens\"} per line");
  cmd->add_option("--num-prompts", a->num_prompts, "requests to send (default 1000)");
  cmd->add_option("--request-rate", a->request_rate, "Poisson arrivals per second (default inf: all at once)");
  cmd->add_option("--max-concurrency", a->max_concurrency, "most requests in flight (default: no cap)");
  cmd->add_option("--random-input-len", a->random_input_len, "random dataset: prompt tokens (default 1024)");
  cmd->add_option("--random-output-len", a->random_output_len, "random dataset: output tokens (default 128)");
  cmd->add_option("--random-range-ratio", a->random_range_ratio, "random dataset: lengths vary by +-ratio");
  cmd->add_option("--random-vocab-size", a->random_vocab_size, "random dataset: token ids below this (32000)");
  cmd->add_option("--seed", a->seed, "dataset and arrival seed");
  cmd->add_option("--timeout", a->timeout_s, "seconds per request (default 600)");
  cmd->add_option("--result-json", a->result_json, "also write the result JSON to this file");
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
