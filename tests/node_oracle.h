// Runs a node oracle script (tests/oracles/*.mjs) once on a JSON request and returns its JSON
// answer, cached on disk by a hash of the request and the script: ctest runs every test in its own
// process, so node runs once per change of either. The script's stderr (warnings) is kept apart
// from the answer and shown when node fails. Null (and `why` says why) when the npm data is missing
// or node fails.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::test {

// Json: nlohmann::json or nlohmann::ordered_json (the request is sent, the answer parsed, as it).
template <class Json>
Json run_node_oracle(const std::filesystem::path& root, const std::string& script, const std::string& needs_module,
                     const Json& request, std::string* why) {
  namespace fs = std::filesystem;
  if (!fs::exists(root / "tests/oracles/node_modules" / needs_module)) {
    *why = "tests/oracles/node_modules/" + needs_module + " missing (run scripts/setup.sh)";
    return nullptr;
  }
  const std::string body = request.dump();
  auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  const fs::path script_path = root / "tests/oracles" / script;
  const std::string key = std::to_string(std::hash<std::string>{}(body + read(script_path)));
  const fs::path cache = fs::temp_directory_path() / ("nanovllm_" + script_path.stem().string() + "_" + key + ".json");
  if (fs::exists(cache)) {
    try {
      return Json::parse(read(cache));
    } catch (const nlohmann::json::exception&) {}
  }
  std::string tmpl = (fs::temp_directory_path() / "nanovllm_oracle_XXXXXX").string();
  std::vector<char> path(tmpl.begin(), tmpl.end());
  path.push_back('\0');
  int fd = mkstemp(path.data());
  if (fd < 0) {
    *why = "mkstemp failed";
    return nullptr;
  }
  const bool wrote = write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  close(fd);
  std::string out;
  if (wrote) {
    std::string cmd = "node '" + script_path.string() + "' " + path.data() + " 2>'" + path.data() + ".err'";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      if (pclose(p) != 0) {
        *why = "node " + script + " failed: " + read(std::string(path.data()) + ".err").substr(0, 800);
        out.clear();
      }
    }
  }
  std::remove(path.data());
  std::remove((std::string(path.data()) + ".err").c_str());
  if (out.empty()) {
    if (why->empty()) *why = "node " + script + " produced no output";
    return nullptr;
  }
  Json parsed;
  try {
    parsed = Json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    *why = "node " + script + " printed something that is not JSON: " + out.substr(0, 800);
    return nullptr;
  }
  const std::string part = cache.string() + "." + std::to_string(getpid());
  { std::ofstream(part, std::ios::binary) << out; }
  fs::rename(part, cache);  // atomic: concurrent tests never see half a file
  return parsed;
}

}  // namespace nanovllm::test
