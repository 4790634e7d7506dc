// Read-only safetensors files through mmap: one file, or a sharded checkpoint described by
// model.safetensors.index.json. The header is validated when the file is opened: the file is a
// regular file, every key has its JSON type, every tensor's byte range lies inside the data
// section, its size equals prod(shape) * dtype size (computed without overflow), no overlaps. An
// index names files inside the model directory only, and no tensor may be in two shards.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/utils/dtype.h"

namespace nanovllm {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // inside the mapping
  size_t nbytes;
  std::string file;  // for error messages
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws LoadError
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model directory: model.safetensors, or the shards named by the index, or
// (fallback) every *.safetensors file in the directory.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& dir);  // throws LoadError
  const TensorInfo* find(const std::string& name) const;   // nullptr if absent
  const TensorInfo& get(const std::string& name) const;    // throws LoadError naming the tensor
  std::vector<std::string> names() const;
  int64_t num_elements() const;  // of all tensors (validated sizes: no overflow below 2^63 bytes)

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

}  // namespace nanovllm
