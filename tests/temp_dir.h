// A scratch directory per test (named after the running GoogleTest test), removed when the test
// ends: for tests that write model directories and files to corrupt them.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace nanovllm::test {

struct TempDir {
  std::filesystem::path dir;

  explicit TempDir(const std::string& prefix = "nanovllm_test_") {
    dir = std::filesystem::temp_directory_path() /
          (prefix + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path(const std::string& f) const { return (dir / f).string(); }
  std::string read(const std::string& f) const {
    std::ifstream in(dir / f, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write(const std::string& f, const std::string& s) const { std::ofstream(dir / f, std::ios::binary) << s; }
};

}  // namespace nanovllm::test
