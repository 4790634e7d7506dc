// Lays out a Hugging Face hub cache the way huggingface_hub writes one (file_download.py): each
// file's content once in models--ORG--NAME/blobs/<digest>, each snapshot a folder
// snapshots/<40-hex commit>/ of relative symlinks into ../../blobs/, and refs/<revision> files
// holding a commit hash without a newline. The blob digest stands in for huggingface_hub's sha256
// (LFS files) or git sha1 (small files): the layout is the same, and nothing reads blob names.
// Used by the resolver's tests (unit/config) and the front end's (unit/frontend).
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace nanovllm::test {

class HfCacheWriter {
 public:
  // The cache of `repo_id` ("ORG/NAME") under the cache root `root` (created as needed).
  HfCacheWriter(std::filesystem::path root, const std::string& repo_id) : root_(std::move(root)) {
    std::string folder = "models--" + repo_id;
    for (size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at)) folder.replace(at, 1, "--");
    repo_ = root_ / folder;
    std::filesystem::create_directories(repo_ / "blobs");
  }

  const std::filesystem::path& repo() const { return repo_; }
  std::filesystem::path snapshot_dir(const std::string& commit) const { return repo_ / "snapshots" / commit; }

  // A snapshot at `commit` holding `files` (name -> content; names may have folders).
  void snapshot(const std::string& commit, const std::map<std::string, std::string>& files) const {
    for (const auto& [name, content] : files) {
      const std::filesystem::path blob = repo_ / "blobs" / digest(content);
      if (!std::filesystem::exists(blob)) std::ofstream(blob, std::ios::binary) << content;
      const std::filesystem::path link = snapshot_dir(commit) / name;
      std::filesystem::create_directories(link.parent_path());
      std::filesystem::remove(link);
      std::filesystem::create_symlink(std::filesystem::relative(blob, link.parent_path()), link);
    }
    std::filesystem::create_directories(snapshot_dir(commit));
  }

  // The same, with the named files of a directory (a model written by the other helpers).
  void snapshot_of_dir(const std::string& commit, const std::filesystem::path& dir,
                       const std::vector<std::string>& names) const {
    std::map<std::string, std::string> files;
    for (const auto& n : names) files[n] = read(dir / n);
    snapshot(commit, files);
  }

  // refs/<revision> -> commit (a branch, a tag, or refs/pr/N).
  void ref(const std::string& revision, const std::string& commit) const {
    const std::filesystem::path p = repo_ / "refs" / revision;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << commit;
  }

  static std::string read(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  // 64 hex digits determined by the content (four salted std::hash values).
  static std::string digest(const std::string& content) {
    std::ostringstream out;
    out << std::hex;
    for (char salt = 'a'; salt < 'e'; ++salt) {
      std::ostringstream part;
      part << std::hex << std::hash<std::string>{}(salt + content);
      out << std::string(16 - std::min<size_t>(16, part.str().size()), '0') << part.str();
    }
    return out.str();
  }

  std::filesystem::path root_, repo_;
};

// Commit hashes for the tests: 40 hex digits made of one repeated digit.
inline std::string commit_hash(char digit) { return std::string(40, digit); }

}  // namespace nanovllm::test
