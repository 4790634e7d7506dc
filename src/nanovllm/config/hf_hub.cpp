// Hugging Face ids -> local directories in the hub cache (see hf_hub.h for the layout). The
// rules are huggingface_hub's (constants.py for the roots, try_to_load_from_cache and
// repo_folder_name in file_download.py for the lookup, _validators.py for ids): a cache written by
// `huggingface-cli download` or by vLLM resolves here as it does in Python, without a network.
#include "nanovllm/config/hf_hub.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"

namespace nanovllm {
namespace fs = std::filesystem;

namespace {

std::string env_or(const EnvLookup& env, const char* name, const std::string& fallback) {
  const char* v = env(name);
  return v && *v ? std::string(v) : fallback;  // set but empty: as unset
}

// os.path.expanduser for "~" and "~/...": $HOME.
std::string expand_user(const std::string& p, const EnvLookup& env) {
  if (p == "~" || p.rfind("~/", 0) == 0) return env_or(env, "HOME", "~") + p.substr(1);
  return p;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One part of an id: [\w.-]+ starting and ending with \w, at most `max` characters.
bool is_id_part(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || !is_word_char(s.front()) || !is_word_char(s.back())) return false;
  for (char c : s)
    if (!is_word_char(c) && c != '-' && c != '.') return false;
  return true;
}

// A revision is a path under refs/ ("main", "v1.0", "refs/pr/1"): never absolute, never "..".
void check_revision(const std::string& revision) {
  if (revision.empty() || revision.front() == '/' || revision.find('\0') != std::string::npos)
    throw UserError("--revision '" + revision + "': not a branch, tag or commit hash");
  for (const auto& part : fs::path(revision))
    if (part == ".." || part == ".")
      throw UserError("--revision '" + revision + "': not a branch, tag or commit hash (it has '" + part.string() +
                      "')");
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The command that fills the cache with `id`, as huggingface_hub's CLIs spell it.
std::string download_command(const std::string& cli, const std::string& id, const std::string& revision,
                             const std::string& download_dir) {
  std::string c = cli + " download " + id;
  if (revision != "main") c += " --revision " + revision;
  if (!download_dir.empty()) c += " --cache-dir " + download_dir;
  return c;
}

std::string not_cached_message(const std::string& what, const std::string& id, const std::string& revision,
                               const std::string& download_dir, const std::vector<std::string>& roots) {
  const std::string folder = hub_repo_folder(id);
  std::string searched, cached_in;
  for (const std::string& r : roots) {
    searched += (searched.empty() ? "" : ", ") + (fs::path(r) / folder).string();
    std::error_code ec;
    if (fs::is_directory(fs::path(r) / folder, ec)) cached_in += (cached_in.empty() ? "" : ", ") + r;
  }
  const std::string state = cached_in.empty()
                                ? "not in the local Hugging Face cache"
                                : "in the local Hugging Face cache (" + cached_in + ") but not at revision " + revision;
  return what + " '" + id + "': no such directory, and the Hugging Face id " + id + " (revision " + revision + ") is " +
         state + " (searched " + searched + "). Nothing is downloaded: get the files with `" +
         download_command("huggingface-cli", id, revision, download_dir) + "` (or `" +
         download_command("hf", id, revision, download_dir) + "`), or pass a local directory";
}

}  // namespace

const EnvLookup& process_env() {
  static const EnvLookup env = [](const char* name) -> const char* { return std::getenv(name); };
  return env;
}

std::string default_hub_cache(const EnvLookup& env) {
  const std::string home = (fs::path(env_or(env, "HOME", "~")) / ".cache").string();
  const std::string hf_home = expand_user(
      env_or(env, "HF_HOME", (fs::path(env_or(env, "XDG_CACHE_HOME", home)) / "huggingface").string()), env);
  const std::string legacy = env_or(env, "HUGGINGFACE_HUB_CACHE", (fs::path(hf_home) / "hub").string());
  return expand_user(env_or(env, "HF_HUB_CACHE", legacy), env);
}

std::vector<std::string> hub_cache_roots(const std::string& download_dir, const EnvLookup& env) {
  std::vector<std::string> roots;
  if (!download_dir.empty()) roots.push_back(download_dir);
  const std::string cache = default_hub_cache(env);
  const auto normal = [](const std::string& p) { return (fs::path(p) / "").lexically_normal(); };  // "/c" = "/c/"
  if (roots.empty() || normal(cache) != normal(download_dir)) roots.push_back(cache);
  return roots;
}

bool is_hub_repo_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash != std::string::npos && s.find('/', slash + 1) != std::string::npos) return false;
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  if (slash != std::string::npos && !is_id_part(s.substr(0, slash), std::string::npos)) return false;
  if (!is_id_part(name, 96)) return false;
  if (s.find("--") != std::string::npos || s.find("..") != std::string::npos) return false;
  return !(s.size() >= 4 && s.compare(s.size() - 4, 4, ".git") == 0);
}

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string hub_repo_folder(const std::string& repo_id) {
  std::string f = "models";
  size_t begin = 0;
  while (true) {
    const size_t slash = repo_id.find('/', begin);
    f += "--" + repo_id.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin);
    if (slash == std::string::npos) return f;
    begin = slash + 1;
  }
}

std::string find_hub_snapshot(const std::string& root, const std::string& repo_id, const std::string& revision) {
  std::error_code ec;
  const fs::path repo = fs::path(root) / hub_repo_folder(repo_id);
  if (!fs::is_directory(repo, ec)) return "";
  std::string commit = revision;
  if (!is_commit_hash(revision)) {
    check_revision(revision);
    const fs::path ref = repo / "refs" / revision;
    if (fs::is_regular_file(ref, ec)) {
      commit = trimmed(read_regular_file(ref.string(), 4096));
      if (!is_commit_hash(commit))
        throw UserError(ref.string() + ": holds '" + commit.substr(0, 80) +
                        "', not a commit hash (a damaged Hugging Face cache: download " + repo_id + " again)");
    }
  }
  const fs::path snapshot = repo / "snapshots" / commit;
  return fs::is_directory(snapshot, ec) ? snapshot.string() : "";
}

std::string resolve_local_dir(const std::string& name, const std::string& revision, const std::string& download_dir,
                              const std::string& what, const EnvLookup& env) {
  if (name.empty()) return "";
  std::error_code ec;
  const fs::file_status st = fs::status(name, ec);
  if (fs::is_directory(st)) return name;
  if (fs::exists(st))
    throw UserError(what + " '" + name + "' is not a directory (give a model directory, a Hugging Face id or a " +
                    "built-in preset)");
  const bool path_like =
      name.front() == '/' || name.front() == '.' || name.front() == '~' || name.find('/') != std::string::npos;
  if (is_hub_repo_id(name)) {
    const std::string rev = revision.empty() ? "main" : revision;
    const std::vector<std::string> roots = hub_cache_roots(download_dir, env);
    for (const std::string& root : roots)
      if (std::string snapshot = find_hub_snapshot(root, name, rev); !snapshot.empty()) return snapshot;
    if (path_like || what != "model") throw UserError(not_cached_message(what, name, rev, download_dir, roots));
    return "";  // a bare model name: a built-in preset, or the caller's error
  }
  if (path_like || what != "model") throw UserError(what + " directory '" + name + "' does not exist");
  return "";
}

std::string local_model_dir(const EngineConfig& cfg, const EnvLookup& env) {
  if (!cfg.model_dir.empty()) return cfg.model_dir;
  const std::string dir = resolve_local_dir(cfg.model, cfg.revision, cfg.download_dir, "model", env);
  if (dir.empty() || dir == cfg.model) return dir;
  // An id's snapshot: huggingface_hub fills it file by file, so an interrupted download leaves
  // one without config.json (or with a link to a blob that never arrived).
  std::error_code ec;
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::exists(config, ec)) {
    const std::string rev = cfg.revision.empty() ? "main" : cfg.revision;
    throw UserError("model '" + cfg.model + "' (revision " + rev + "): the cached snapshot " + dir +
                    (fs::is_symlink(config, ec) ? " links config.json to a missing blob" : " has no config.json") +
                    " (an incomplete download? run `" +
                    download_command("huggingface-cli", cfg.model, rev, cfg.download_dir) + "` again)");
  }
  return dir;
}

void settle_model_dir(EngineConfig& cfg, const EnvLookup& env) {
  if (cfg.model_dir.empty()) cfg.model_dir = local_model_dir(cfg, env);
}

}  // namespace nanovllm
