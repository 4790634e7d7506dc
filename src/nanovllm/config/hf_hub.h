// Models and tokenizers by Hugging Face id (`Qwen/Qwen3-0.6B`), found offline in the local
// Hugging Face cache exactly as huggingface_hub lays it out (file_download.py, constants.py):
//
//   <cache root>/models--ORG--NAME/refs/<revision>          a file holding a 40-hex commit hash
//   <cache root>/models--ORG--NAME/snapshots/<hash>/<file>  relative symlinks into ../../blobs/
//
// The cache root is $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (Hugging Face's own variables,
// read as huggingface_hub reads them; they are not our settings). --download-dir is a cache root
// searched first. A revision that is a full commit hash names snapshots/<hash> directly; any other
// (a branch, a tag, refs/pr/1) is read from refs/<revision>. Nothing is downloaded: an id that is
// not cached is a UserError saying where we looked and how to fetch it.
//
// A local directory always wins over an id (vLLM checks os.path.isdir first). The resolution runs
// once, where the CLI or the front end settles its EngineConfig (settle_model_dir): the resolved
// snapshot goes to EngineConfig::model_dir for loading, and `model` stays the name shown.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"

namespace nanovllm {

// Reads one environment variable (nullptr: unset); std::getenv in use, a map in tests.
using EnvLookup = std::function<const char*(const char*)>;
const EnvLookup& process_env();

// huggingface_hub's default cache root (HF_HUB_CACHE and the variables behind it, `~` expanded).
std::string default_hub_cache(const EnvLookup& env = process_env());
// The cache roots searched, in order: `download_dir` (when given), then default_hub_cache.
std::vector<std::string> hub_cache_roots(const std::string& download_dir, const EnvLookup& env = process_env());

// huggingface_hub's validate_repo_id: "NAME" or "ORG/NAME", [A-Za-z0-9_.-], each part starting
// and ending with [A-Za-z0-9_], the name at most 96 characters, no "--" or "..", no ".git" end.
bool is_hub_repo_id(const std::string& s);
// A full commit hash: 40 lowercase hex digits (huggingface_hub's REGEX_COMMIT_HASH).
bool is_commit_hash(const std::string& s);
// "models--ORG--NAME" (repo_folder_name).
std::string hub_repo_folder(const std::string& repo_id);

// The snapshot directory of `repo_id` at `revision` under one cache root, or "" when that root does
// not hold it (no repo folder, no ref, no snapshot). Throws UserError for a revision that would
// leave refs/ (absolute, "..") or a ref file that holds no commit hash.
std::string find_hub_snapshot(const std::string& root, const std::string& repo_id, const std::string& revision);

// Where the files of `name` are (a model, or `what` = "--tokenizer"):
//   - an existing directory: itself, whatever its spelling;
//   - an id cached in one of the roots: its snapshot at `revision` (empty: "main");
//   - "" for a bare model name that is neither (no '/': a built-in preset, left to the caller).
// Throws UserError: an existing file that is not a directory; a path (starts with '/', '.' or '~',
// or has a '/'), or any name when `what` is not "model", that does not exist and is not a cached
// id ("... does not exist", and for an id-shaped one the id, revision, places searched and how to
// get the files).
std::string resolve_local_dir(const std::string& name, const std::string& revision, const std::string& download_dir,
                              const std::string& what = "model", const EnvLookup& env = process_env());

// The local directory of cfg.model (resolve_local_dir with cfg.revision and cfg.download_dir):
// its model_dir once settled, else resolved now. An id's snapshot must hold config.json (else a
// UserError naming the snapshot). "" for a preset.
std::string local_model_dir(const EngineConfig& cfg, const EnvLookup& env = process_env());
// Sets cfg.model_dir to local_model_dir(cfg) unless it is set: the one place an id becomes a path.
void settle_model_dir(EngineConfig& cfg, const EnvLookup& env = process_env());

}  // namespace nanovllm
