#include "nanovllm/utils/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace fs = std::filesystem;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return DType::F32;
  if (s == "BF16") return DType::BF16;
  if (s == "F16") return DType::F16;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  throw LoadError(path + ": tensor '" + name + "' has unsupported dtype " + s +
                  " (supported: F32, BF16, F16, I32, I64)");
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw LoadError(path + ": cannot open safetensors file");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw LoadError(path + ": cannot stat file");
  }
  size_ = size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw LoadError(path + ": truncated safetensors file (" + std::to_string(size_) +
                    " bytes, need at least 8 for the header length)");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw LoadError(path + ": mmap failed");
  }
  try {
    auto* bytes = static_cast<const uint8_t*>(map_);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | bytes[i];
    if (hlen > size_ - 8)
      throw LoadError(path + ": header length " + std::to_string(hlen) + " exceeds file size " +
                      std::to_string(size_) + " (truncated or corrupt file)");
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(bytes + 8, bytes + 8 + hlen);
    } catch (const nlohmann::json::parse_error& e) {
      throw LoadError(path + ": header is not valid JSON at byte offset " +
                      std::to_string(8 + (e.byte ? e.byte - 1 : 0)) + " (corrupt file)");
    }
    if (!header.is_object()) throw LoadError(path + ": header is not a JSON object");
    const size_t data_start = 8 + hlen, data_size = size_ - data_start;
    std::vector<std::pair<size_t, size_t>> ranges;
    for (auto& [name, v] : header.items()) {
      if (name == "__metadata__") continue;
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        throw LoadError(path + ": tensor '" + name + "' lacks dtype/shape/data_offsets");
      TensorInfo t;
      t.name = name;
      t.file = path;
      t.dtype = parse_dtype(v["dtype"].get<std::string>(), path, name);
      for (auto& d : v["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          throw LoadError(path + ": tensor '" + name + "' has an invalid shape");
        t.shape.push_back(d.get<int64_t>());
      }
      auto& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        throw LoadError(path + ": tensor '" + name + "' has invalid data_offsets");
      size_t b = off[0].get<size_t>(), e = off[1].get<size_t>();
      if (b > e || e > data_size)
        throw LoadError(path + ": tensor '" + name + "' data range [" + std::to_string(b) + ", " +
                        std::to_string(e) + ") lies outside the data section of " +
                        std::to_string(data_size) + " bytes (truncated or corrupt file)");
      if (size_t(t.numel()) * dtype_size(t.dtype) != e - b)
        throw LoadError(path + ": tensor '" + name + "' has " + std::to_string(e - b) +
                        " bytes but its shape and dtype need " +
                        std::to_string(size_t(t.numel()) * dtype_size(t.dtype)));
      t.data = bytes + data_start + b;
      t.nbytes = e - b;
      ranges.emplace_back(b, e);
      tensors_.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        throw LoadError(path + ": overlapping tensor data ranges at byte offset " +
                        std::to_string(ranges[i].first));
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dir) {
  std::vector<std::string> paths;
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw LoadError(index.string() + ": invalid JSON: " + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw LoadError(index.string() + ": missing 'weight_map' object");
    for (auto& [name, file] : j["weight_map"].items()) {
      std::string p = (fs::path(dir) / file.get<std::string>()).string();
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    paths.push_back((fs::path(dir) / "model.safetensors").string());
  } else {
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) throw LoadError(dir + ": no *.safetensors weights found");
  for (auto& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (auto& [name, info] : files_.back()->tensors()) index_[name] = &info;
  }
}

const TensorInfo* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& SafetensorsCheckpoint::get(const std::string& name) const {
  auto* t = find(name);
  if (!t) throw LoadError("missing tensor '" + name + "' in the checkpoint");
  return *t;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : index_) out.push_back(n);
  return out;
}

}  // namespace nanovllm
