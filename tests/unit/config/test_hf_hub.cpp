// Models by Hugging Face id (config/hf_hub.h) over caches laid out as huggingface_hub writes them
// (hf_cache_writer.h): the cache root from Hugging Face's variables, an id by its main branch, by
// a tag or branch and by a commit hash, --download-dir searched first, a local directory winning
// over an id, and the errors: an id not cached (its parts asserted), a directory that does not
// exist, a snapshot without config.json, a damaged ref, a revision leaving refs/.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "hf_cache_writer.h"
#include "nanovllm/config/hf_hub.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"

using namespace nanovllm;
using test::commit_hash;
using test::HfCacheWriter;
namespace fs = std::filesystem;

namespace {

// An environment of the given variables only.
EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const std::string kId = "Org-1/Tiny_Model.v2";
const std::map<std::string, std::string> kModelFiles = {
    {"config.json", "{\"a\": 1}"}, {"tokenizer.json", "{}"}, {"model.safetensors", "weights"}};

// The cache of kId: main -> commit 1, the tag v2 -> commit 2, the PR ref refs/pr/3 -> commit 3,
// and a snapshot of commit 4 that no ref names.
HfCacheWriter layout(const fs::path& root) {
  HfCacheWriter w(root, kId);
  for (char c : {'1', '2', '3', '4'}) {
    auto files = kModelFiles;
    files["config.json"] = std::string("{\"commit\": ") + c + "}";
    w.snapshot(commit_hash(c), files);
  }
  w.ref("main", commit_hash('1'));
  w.ref("v2", commit_hash('2'));
  w.ref("refs/pr/3", commit_hash('3'));
  return w;
}

TEST(HfHub, RepoIdsFollowHuggingFaceHubsRules) {
  for (const char* ok : {"gpt2", "Qwen/Qwen3-0.6B", "a_b/c.d-e", "meta-llama/Llama-3.1-8B-Instruct", "x/_y_"})
    EXPECT_TRUE(is_hub_repo_id(ok)) << ok;
  for (const char* bad : {"", "a/b/c", "a--b/c", "a/b..c", "./x", "/abs/x", "a/b.git", "-a/b", "a/b-", "a/", "/b",
                          "a b/c", "a/b\\c", "~/m"})
    EXPECT_FALSE(is_hub_repo_id(bad)) << bad;
  EXPECT_TRUE(is_hub_repo_id("o/" + std::string(96, 'n')));
  EXPECT_FALSE(is_hub_repo_id("o/" + std::string(97, 'n')));
  EXPECT_EQ(hub_repo_folder("Qwen/Qwen3-0.6B"), "models--Qwen--Qwen3-0.6B");
  EXPECT_EQ(hub_repo_folder("gpt2"), "models--gpt2");
  EXPECT_TRUE(is_commit_hash(commit_hash('a')));
  EXPECT_FALSE(is_commit_hash(commit_hash('A')));
  EXPECT_FALSE(is_commit_hash(commit_hash('1').substr(1)));
}

TEST(HfHub, CacheRootFollowsHuggingFacesVariables) {
  EXPECT_EQ(default_hub_cache(env_of({{"HOME", "/h"}})), "/h/.cache/huggingface/hub");
  EXPECT_EQ(default_hub_cache(env_of({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}})), "/x/huggingface/hub");
  EXPECT_EQ(default_hub_cache(env_of({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}, {"HF_HOME", "/hf"}})), "/hf/hub");
  EXPECT_EQ(default_hub_cache(env_of({{"HOME", "/h"}, {"HF_HOME", "~/hf"}})), "/h/hf/hub");
  EXPECT_EQ(default_hub_cache(env_of({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/old"}})), "/old");
  EXPECT_EQ(default_hub_cache(env_of({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/old"}, {"HF_HUB_CACHE", "/c"}})),
            "/c");
  EXPECT_EQ(default_hub_cache(env_of({{"HOME", "/h"}, {"HF_HUB_CACHE", ""}})), "/h/.cache/huggingface/hub");
  const auto roots = hub_cache_roots("/dl", env_of({{"HF_HUB_CACHE", "/c"}}));
  EXPECT_EQ(roots, (std::vector<std::string>{"/dl", "/c"}));
  EXPECT_EQ(hub_cache_roots("/c/", env_of({{"HF_HUB_CACHE", "/c"}})), (std::vector<std::string>{"/c/"}));
}

TEST(HfHub, ResolvesAnIdByBranchTagPullRequestAndCommit) {
  test::TempDir t;
  const HfCacheWriter w = layout(t.dir / "hub");
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}});
  const auto resolve = [&](const std::string& rev) { return resolve_local_dir(kId, rev, "", "model", env); };
  EXPECT_EQ(resolve("main"), w.snapshot_dir(commit_hash('1')).string());
  EXPECT_EQ(resolve(""), w.snapshot_dir(commit_hash('1')).string());  // unset: main
  EXPECT_EQ(resolve("v2"), w.snapshot_dir(commit_hash('2')).string());
  EXPECT_EQ(resolve("refs/pr/3"), w.snapshot_dir(commit_hash('3')).string());
  EXPECT_EQ(resolve(commit_hash('4')), w.snapshot_dir(commit_hash('4')).string());  // no ref: straight to snapshots
  // The files are relative links into blobs/, read through the resolved directory.
  const fs::path config = fs::path(resolve("v2")) / "config.json";
  ASSERT_TRUE(fs::is_symlink(config));
  EXPECT_TRUE(fs::read_symlink(config).is_relative());
  EXPECT_EQ(fs::read_symlink(config).parent_path(), fs::path("../../blobs"));
  EXPECT_EQ(HfCacheWriter::read(config), "{\"commit\": 2}");
  // A moved ref is followed (huggingface_hub rewrites refs/main on each download).
  w.ref("main", commit_hash('2'));
  EXPECT_EQ(resolve("main"), w.snapshot_dir(commit_hash('2')).string());
}

TEST(HfHub, FindsTheCacheThroughHfHomeAndDownloadDir) {
  test::TempDir t;
  layout(t.dir / "home" / "hub");
  const std::string via_home =
      resolve_local_dir(kId, "main", "", "model", env_of({{"HF_HOME", (t.dir / "home").string()}}));
  EXPECT_EQ(via_home, (t.dir / "home/hub/models--Org-1--Tiny_Model.v2/snapshots" / commit_hash('1')).string());
  // No variable but HOME: ~/.cache/huggingface/hub.
  layout(t.dir / ".cache/huggingface/hub");
  EXPECT_EQ(resolve_local_dir(kId, "main", "", "model", env_of({{"HOME", t.dir.string()}})),
            (t.dir / ".cache/huggingface/hub/models--Org-1--Tiny_Model.v2/snapshots" / commit_hash('1')).string());
}

TEST(HfHub, DownloadDirIsSearchedFirst) {
  test::TempDir t;
  layout(t.dir / "default");
  HfCacheWriter dl(t.dir / "dl", kId);
  dl.snapshot(commit_hash('9'), kModelFiles);
  dl.ref("main", commit_hash('9'));
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "default").string()}});
  const std::string dl_dir = (t.dir / "dl").string();
  EXPECT_EQ(resolve_local_dir(kId, "main", dl_dir, "model", env), dl.snapshot_dir(commit_hash('9')).string());
  // Not there at that revision: the default cache has it.
  EXPECT_EQ(resolve_local_dir(kId, "v2", dl_dir, "model", env),
            (t.dir / "default/models--Org-1--Tiny_Model.v2/snapshots" / commit_hash('2')).string());
  // Only --download-dir (no default cache anywhere).
  EXPECT_EQ(resolve_local_dir(kId, "main", dl_dir, "model", env_of({{"HF_HUB_CACHE", (t.dir / "none").string()}})),
            dl.snapshot_dir(commit_hash('9')).string());
}

TEST(HfHub, AnIdNotCachedNamesTheIdRevisionPlacesAndHowToGetIt) {
  test::TempDir t;
  layout(t.dir / "hub");
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}});
  std::string e =
      error_of([&] { resolve_local_dir("Qwen/Qwen3-0.6B", "main", (t.dir / "dl").string(), "model", env); });
  EXPECT_NE(e.find("model 'Qwen/Qwen3-0.6B': no such directory"), std::string::npos) << e;
  EXPECT_NE(e.find("(revision main) is not in the local Hugging Face cache"), std::string::npos) << e;
  EXPECT_NE(e.find((t.dir / "dl/models--Qwen--Qwen3-0.6B").string()), std::string::npos) << e;
  EXPECT_NE(e.find((t.dir / "hub/models--Qwen--Qwen3-0.6B").string()), std::string::npos) << e;
  EXPECT_NE(e.find("Nothing is downloaded"), std::string::npos) << e;
  EXPECT_NE(e.find("`huggingface-cli download Qwen/Qwen3-0.6B --cache-dir " + (t.dir / "dl").string() + "`"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("`hf download Qwen/Qwen3-0.6B"), std::string::npos) << e;
  EXPECT_NE(e.find("or pass a local directory"), std::string::npos) << e;
  // Cached, but not at that revision.
  e = error_of([&] { resolve_local_dir(kId, "v9", "", "model", env); });
  EXPECT_NE(e.find("(revision v9) is in the local Hugging Face cache (" + (t.dir / "hub").string() +
                   ") but not at revision v9"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("`huggingface-cli download " + kId + " --revision v9`"), std::string::npos) << e;
  e = error_of([&] { resolve_local_dir(kId, commit_hash('7'), "", "model", env); });
  EXPECT_NE(e.find("not at revision " + commit_hash('7')), std::string::npos) << e;
  // A tokenizer id: named as the flag.
  e = error_of([&] { resolve_local_dir("Org/Tok", "main", "", "--tokenizer", env); });
  EXPECT_EQ(e.rfind("--tokenizer 'Org/Tok': no such directory", 0), 0u) << e;
}

TEST(HfHub, PathsThatDoNotExistAreReportedAsSuch) {
  test::TempDir t;
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}});
  for (const std::string p : {(t.dir / "nope").string(), std::string("./nope"), std::string("../a/b/c")})
    EXPECT_EQ(error_of([&] { resolve_local_dir(p, "main", "", "model", env); }),
              "model directory '" + p + "' does not exist")
        << p;
  EXPECT_EQ(resolve_local_dir("qwen3-0.6b", "main", "", "model", env), "");  // a bare name: the caller's (a preset)
  EXPECT_EQ(error_of([&] { resolve_local_dir("tok", "main", "", "--tokenizer", env); }),
            "--tokenizer 'tok': no such directory, and the Hugging Face id tok (revision main) is not in the local "
            "Hugging Face cache (searched " +
                (t.dir / "hub/models--tok").string() +
                "). Nothing is downloaded: get the files with `huggingface-cli download tok` (or `hf download tok`), "
                "or pass a local directory");
  t.write("file", "x");
  EXPECT_NE(error_of([&] { resolve_local_dir(t.path("file"), "main", "", "model", env); }).find("is not a directory"),
            std::string::npos);
  EXPECT_EQ(resolve_local_dir(t.dir.string(), "main", "", "model", env), t.dir.string());
}

TEST(HfHub, ALocalDirectoryWinsOverAnId) {
  test::TempDir t;
  layout(t.dir / "hub");
  fs::create_directories(t.dir / "work" / kId);
  const fs::path before = fs::current_path();
  fs::current_path(t.dir / "work");
  const std::string got =
      resolve_local_dir(kId, "main", "", "model", env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}}));
  fs::current_path(before);
  EXPECT_EQ(got, kId);
}

TEST(HfHub, ASnapshotWithoutConfigJsonIsAClearError) {
  test::TempDir t;
  HfCacheWriter w(t.dir / "hub", kId);
  w.snapshot(commit_hash('1'), {{"tokenizer.json", "{}"}});
  w.ref("main", commit_hash('1'));
  EngineConfig cfg;
  cfg.model = kId;
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}});
  std::string e = error_of([&] { local_model_dir(cfg, env); });
  EXPECT_EQ(e, "model '" + kId + "' (revision main): the cached snapshot " + w.snapshot_dir(commit_hash('1')).string() +
                   " has no config.json (an incomplete download? run `huggingface-cli download " + kId + "` again)");
  // A link to a blob that never arrived.
  fs::create_symlink("../../blobs/0000", w.snapshot_dir(commit_hash('1')) / "config.json");
  e = error_of([&] { local_model_dir(cfg, env); });
  EXPECT_NE(e.find("links config.json to a missing blob"), std::string::npos) << e;
}

TEST(HfHub, DamagedRefsAndRevisionsOutsideRefsAreRefused) {
  test::TempDir t;
  const HfCacheWriter w = layout(t.dir / "hub");
  const EnvLookup env = env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}});
  w.ref("broken", "not a hash");
  std::string e = error_of([&] { resolve_local_dir(kId, "broken", "", "model", env); });
  EXPECT_NE(e.find("refs/broken: holds 'not a hash', not a commit hash"), std::string::npos) << e;
  w.ref("newline", commit_hash('2') + "\n");  // written by hand: the newline is tolerated
  EXPECT_EQ(resolve_local_dir(kId, "newline", "", "model", env), w.snapshot_dir(commit_hash('2')).string());
  for (const std::string rev : {"../../x", "/etc/passwd", "a/../../b"}) {
    e = error_of([&] { resolve_local_dir(kId, rev, "", "model", env); });
    EXPECT_NE(e.find("--revision '" + rev + "': not a branch, tag or commit hash"), std::string::npos)
        << rev << ": " << e;
  }
}

TEST(HfHub, SettlingKeepsTheNameAndLoadsFromTheSnapshot) {
  test::TempDir t;
  const HfCacheWriter w = layout(t.dir / "hub");
  EngineConfig cfg;
  cfg.model = kId;
  cfg.revision = "v2";
  settle_model_dir(cfg, env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}}));
  EXPECT_EQ(cfg.model, kId);
  EXPECT_EQ(cfg.model_path(), w.snapshot_dir(commit_hash('2')).string());
  // Settled once: a later change of the cache does not move it.
  w.ref("v2", commit_hash('3'));
  settle_model_dir(cfg, env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}}));
  EXPECT_EQ(cfg.model_path(), w.snapshot_dir(commit_hash('2')).string());
  EngineConfig preset;
  preset.model = "qwen3-0.6b";
  settle_model_dir(preset, env_of({{"HF_HUB_CACHE", (t.dir / "hub").string()}}));
  EXPECT_EQ(preset.model_path(), "qwen3-0.6b");
}

}  // namespace
