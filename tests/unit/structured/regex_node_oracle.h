// Runs one of the node oracle scripts (tests/oracles/*.mjs) on a JSON request and returns its JSON
// answer, for the regex and EBNF oracle tests. Node runs once per distinct request: ctest runs
// every test in its own process, so the answer is cached in the temp directory under a hash of the
// scripts and the request (written atomically). Returns null with `why` set when node_modules is
// missing (the caller skips with that reason) or node fails (the caller fails with it).
#pragma once
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::structured::test {

// Repository root: $NANOVLLM_SOURCE_DIR (set by ctest), else derived from this file's path, else
// the first parent of the working directory holding tests/oracles (as tests/unit/jinja does).
inline std::filesystem::path repo_root() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  const fs::path from_file = fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
  if (from_file.is_absolute()) return from_file;
  for (fs::path p = fs::current_path(); !p.empty() && p != p.parent_path(); p = p.parent_path())
    if (fs::exists(p / "tests/oracles/package.json")) return p;
  return from_file;
}

inline bool xgrammar_installed() {
  return std::filesystem::exists(repo_root() / "tests/oracles/node_modules/@mlc-ai/web-xgrammar");
}

inline nlohmann::json run_node_oracle(const std::string& script, const nlohmann::json& request, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path root = repo_root();
  if (!xgrammar_installed()) {
    *why = "tests/oracles/node_modules missing (run scripts/setup.sh)";
    return nullptr;
  }
  const auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  const std::string body = request.dump();
  // The key covers the request and the scripts (this one and the xgrammar loader it imports).
  const std::string key = slurp(root / "tests/oracles" / script) + slurp(root / "tests/oracles/ebnf_oracle.mjs") + body;
  const fs::path cache = fs::temp_directory_path() /
                         ("nanovllm_" + script + "_" + std::to_string(std::hash<std::string>{}(key)) + ".json");
  if (fs::exists(cache)) {
    try {
      return nlohmann::json::parse(slurp(cache));
    } catch (const nlohmann::json::exception&) {}
  }
  std::string tmpl = (fs::temp_directory_path() / "nanovllm_oracle_XXXXXX").string();
  std::vector<char> path(tmpl.begin(), tmpl.end());
  path.push_back('\0');
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    *why = "mkstemp failed";
    return nullptr;
  }
  const bool wrote = write(fd, body.data(), body.size()) == ssize_t(body.size());
  close(fd);
  std::string out;
  if (wrote) {
    // stderr is dropped: xgrammar prints warnings there (e.g. on negated classes past U+007F).
    const std::string cmd = "node '" + (root / "tests/oracles" / script).string() + "' " + path.data() + " 2>/dev/null";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      if (pclose(p) != 0) {
        *why = "node " + script + " failed: " + out.substr(0, 500);
        out.clear();
      }
    }
  }
  std::remove(path.data());
  if (out.empty()) {
    if (why->empty()) *why = "node " + script + " produced no output";
    return nullptr;
  }
  nlohmann::json parsed = nlohmann::json::parse(out);
  const std::string part = cache.string() + "." + std::to_string(getpid());
  { std::ofstream(part, std::ios::binary) << out; }
  fs::rename(part, cache);
  return parsed;
}

}  // namespace nanovllm::structured::test
