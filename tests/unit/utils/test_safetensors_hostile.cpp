// Hostile safetensors files and indexes: each is a LoadError naming the file (and the tensor or
// key), never a hang (FIFO), a nlohmann type_error escaping as an internal error, or a size
// that wraps around 64 bits.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"

using namespace nanovllm;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using test::TempDir;

// A safetensors file: 8-byte little-endian header length, the header, `data_bytes` zero bytes.
std::string safetensors(const std::string& header, size_t data_bytes) {
  std::string f(8, '\0');
  for (int i = 0; i < 8; ++i) f[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return f + header + std::string(data_bytes, '\0');
}

// One F32 tensor "w" of shape [2] (8 bytes), with `patch` applied to its entry.
std::string one_tensor(const json& patch = json::object()) {
  json entry = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}};
  entry.merge_patch(patch);
  return safetensors(json{{"w", entry}}.dump(), 8);
}

// The LoadError message of opening `path` as a safetensors file ("" if it opened).
std::string file_error(const std::string& path) {
  try {
    SafetensorsFile f(path);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

std::string checkpoint_error(const fs::path& dir) {
  try {
    SafetensorsCheckpoint c(dir.string());
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(msg, part) EXPECT_NE(std::string(msg).find(part), std::string::npos) << "message: " << (msg)

}  // namespace

TEST(SafetensorsHostile, WellFormedFileOpens) {
  TempDir t;
  t.write("m.safetensors", one_tensor());
  SafetensorsFile f(t.path("m.safetensors"));
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors().at("w").nbytes, 8u);
}

// Before: open() of a FIFO blocked forever waiting for a writer.
// Found by fuzz_safetensors: a number past a double's range escaped as nlohmann's out_of_range
// (the CLI's "internal error"); deep nesting is refused before parsing.
TEST(SafetensorsHostile, OverflowingNumberAndDeepNestingInTheHeaderAreLoadErrors) {
  TempDir t;
  t.write("big.safetensors", safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "x": 6e666})", 8));
  EXPECT_HAS(file_error(t.path("big.safetensors")), "number overflow");
  t.write("deep.safetensors", safetensors("{\"x\": " + std::string(1000, '[') + std::string(1000, ']') + "}", 0));
  EXPECT_HAS(file_error(t.path("deep.safetensors")), "header nests JSON deeper than 128 levels");
}

TEST(SafetensorsHostile, NonRegularFilesAreRefused) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.path("fifo.safetensors").c_str(), 0600), 0);
  std::string msg = file_error(t.path("fifo.safetensors"));
  EXPECT_HAS(msg, "fifo.safetensors: not a regular file (it is a FIFO)");
  fs::create_directories(t.dir / "dir.safetensors");
  EXPECT_HAS(file_error(t.path("dir.safetensors")), "dir.safetensors: not a regular file (it is a directory)");
  EXPECT_HAS(file_error("/dev/null"), "/dev/null: not a regular file (it is a character device)");
  // A symlink to a regular file (the Hugging Face cache layout) is fine.
  t.write("blob", one_tensor());
  fs::create_symlink(t.dir / "blob", t.dir / "link.safetensors");
  EXPECT_EQ(file_error(t.path("link.safetensors")), "");
}

TEST(SafetensorsHostile, ModelDirectoryWithFifoWeightsIsRefused) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.path("model.safetensors").c_str(), 0600), 0);
  EXPECT_HAS(checkpoint_error(t.dir), "model.safetensors: not a regular file (it is a FIFO)");
}

TEST(SafetensorsHostile, ReadRegularFileRefusesFifoAndHugeFiles) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.path("config.json").c_str(), 0600), 0);
  EXPECT_THROW(read_regular_file(t.path("config.json"), 1 << 20), LoadError);
  t.write("big.json", std::string(100, ' '));
  try {
    read_regular_file(t.path("big.json"), 99);
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_HAS(e.what(), "big.json: 100 bytes, more than the 99");
  }
  EXPECT_EQ(read_regular_file(t.path("big.json"), 100).size(), 100u);
}

// Before: a dtype that is not a string escaped as nlohmann's type_error ("internal error", exit 1).
TEST(SafetensorsHostile, WrongJsonTypesNameTheTensorAndKey) {
  TempDir t;
  struct Case {
    json patch;
    const char* want;
  } cases[] = {
      {{{"dtype", 5}}, "tensor 'w': \"dtype\" must be a string such as \"BF16\" (got number)"},
      {{{"dtype", nullptr}}, "lacks dtype/shape/data_offsets"},
      {{{"dtype", "F8_E5M2"}}, "unsupported dtype F8_E5M2"},
      {{{"shape", "2"}}, "tensor 'w': \"shape\" must be an array of sizes (got string)"},
      {{{"shape", 2}}, "tensor 'w': \"shape\" must be an array of sizes (got number)"},
      {{{"shape", {2.5}}}, "\"shape\" [2.5] is not a list of non-negative integers"},
      {{{"shape", {-2}}}, "is not a list of non-negative integers"},
      {{{"data_offsets", "0-8"}}, "tensor 'w' has invalid data_offsets"},
      {{{"data_offsets", {0, -8}}}, "tensor 'w' has invalid data_offsets"},
  };
  for (const auto& c : cases) {
    t.write("m.safetensors", one_tensor(c.patch));
    EXPECT_HAS(file_error(t.path("m.safetensors")), c.want);
  }
  t.write("m.safetensors", safetensors(R"({"__metadata__": 5})", 0));
  EXPECT_HAS(file_error(t.path("m.safetensors")), "\"__metadata__\" must be an object (got number)");
  t.write("m.safetensors", safetensors(R"({"w": [1, 2]})", 0));
  EXPECT_HAS(file_error(t.path("m.safetensors")), "tensor 'w' lacks dtype/shape/data_offsets");
}

// Before: prod(shape) * dtype size wrapped around int64 (undefined behaviour); a shape of
// [2^62, 4] gave 0 elements and matched an empty byte range.
TEST(SafetensorsHostile, SizesThatOverflowAreRefused) {
  TempDir t;
  const int64_t big = int64_t(1) << 62;
  t.write("m.safetensors",
          safetensors(json{{"w", {{"dtype", "F32"}, {"shape", {big, 4}}, {"data_offsets", {0, 0}}}}}.dump(), 0));
  EXPECT_HAS(file_error(t.path("m.safetensors")), "whose size does not fit in 64 bits");
  // 2^61 elements fit, 2^61 * 4 bytes do not.
  t.write("m.safetensors",
          safetensors(json{{"w", {{"dtype", "F32"}, {"shape", {big / 2}}, {"data_offsets", {0, 0}}}}}.dump(), 0));
  EXPECT_HAS(file_error(t.path("m.safetensors")), "whose size does not fit in 64 bits");
  t.write("m.safetensors", one_tensor({{"data_offsets", {0, UINT64_MAX}}}));
  EXPECT_HAS(file_error(t.path("m.safetensors")), "lies outside the data section of 8 bytes");
}

TEST(SafetensorsHostile, OversizedHeaderIsRefused) {
  TempDir t;
  // A sparse file, so that the claimed 200 MB header lies inside it.
  std::string head(8, '\0');
  const uint64_t hlen = 200'000'000;
  for (int i = 0; i < 8; ++i) head[size_t(i)] = char((hlen >> (8 * i)) & 0xff);
  t.write("m.safetensors", head);
  fs::resize_file(t.dir / "m.safetensors", hlen + 8);
  EXPECT_HAS(file_error(t.path("m.safetensors")), "exceeds the format's limit of 100000000 bytes");
}

// Before: a weight_map value that is not a string escaped as a type_error.
TEST(SafetensorsHostile, IndexWithWrongTypesOrPathsIsRefused) {
  TempDir t;
  t.write("a.safetensors", one_tensor());
  auto index = [&](const json& j) { t.write("model.safetensors.index.json", j.dump()); };
  index({{"weight_map", {{"w", 7}}}});
  EXPECT_HAS(checkpoint_error(t.dir),
             "model.safetensors.index.json: weight_map['w'] must be a file name string (got number)");
  index({{"weight_map", {{"w", "/etc/passwd"}}}});
  EXPECT_HAS(checkpoint_error(t.dir),
             "weight_map['w'] = '/etc/passwd' does not name a file inside the model directory");
  index({{"weight_map", {{"w", "../a.safetensors"}}}});
  EXPECT_HAS(checkpoint_error(t.dir), "does not name a file inside the model directory");
  index({{"weight_map", {"a.safetensors"}}});
  EXPECT_HAS(checkpoint_error(t.dir), "missing 'weight_map' object");
  index(json::array({1, 2}));
  EXPECT_HAS(checkpoint_error(t.dir), "missing 'weight_map' object");
  index({{"weight_map", {{"w", "a.safetensors"}}}});
  EXPECT_EQ(checkpoint_error(t.dir), "");
}

TEST(SafetensorsHostile, IndexThatIsAFifoIsRefused) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.path("model.safetensors.index.json").c_str(), 0600), 0);
  EXPECT_HAS(checkpoint_error(t.dir), "model.safetensors.index.json: not a regular file (it is a FIFO)");
}

// Before: the shard read last silently won.
TEST(SafetensorsHostile, TensorInTwoShardsIsAmbiguous) {
  TempDir t;
  t.write("a.safetensors", one_tensor());
  t.write("b.safetensors", one_tensor());
  t.write("model.safetensors.index.json",
          json{{"weight_map", {{"w", "a.safetensors"}, {"v", "b.safetensors"}}}}.dump());
  EXPECT_HAS(checkpoint_error(t.dir), "tensor 'w' is also in");
}
