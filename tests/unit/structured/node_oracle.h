// Runs a node script from tests/oracles on one JSON request and returns its JSON answer, cached in
// the temp directory by a hash of (script, request) so that the per-test processes ctest starts run
// node once per change. Returns null with `why` set when node_modules or node is unavailable.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace nanovllm::structured::test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline nlohmann::json run_node_oracle(const std::string& script, const nlohmann::ordered_json& request,
                                      std::string* why) {
  namespace fs = std::filesystem;
  const fs::path oracles = fs::path(nanovllm::test::source_dir()) / "tests/oracles";
  if (!fs::exists(oracles / "node_modules/@mlc-ai/web-xgrammar")) {
    *why = "tests/oracles/node_modules is missing (npm install in tests/oracles)";
    return nullptr;
  }
  const std::string body = request.dump();
  const std::string script_text = slurp(oracles / script);
  const size_t key = std::hash<std::string>{}(script_text + '\0' + body);
  const fs::path tmp = fs::temp_directory_path();
  const fs::path cached = tmp / ("nanovllm_" + fs::path(script).stem().string() + "_" + std::to_string(key) + ".json");
  if (fs::exists(cached)) {
    auto j = nlohmann::json::parse(slurp(cached), nullptr, false);
    if (!j.is_discarded()) return j;
  }
  const fs::path req =
      tmp / ("nanovllm_oracle_req_" + std::to_string(::getpid()) + "_" + std::to_string(key) + ".json");
  std::ofstream(req, std::ios::binary) << body;
  const std::string cmd = "cd '" + oracles.string() + "' && node '" + script + "' '" + req.string() + "' 2>&1";
  std::string out;
  int status = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    status = ::pclose(p);
  }
  fs::remove(req);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (status != 0 || j.is_discarded()) {
    *why = "node " + script + " failed (status " + std::to_string(status) + "): " + out.substr(0, 800);
    return nullptr;
  }
  const fs::path part = cached.string() + "." + std::to_string(::getpid());
  std::ofstream(part, std::ios::binary) << out;
  fs::rename(part, cached);  // atomic: a concurrent reader never sees half a file
  return j;
}

}  // namespace nanovllm::structured::test
