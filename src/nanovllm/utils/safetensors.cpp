#include "nanovllm/utils/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/checked_math.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"
#include "nanovllm/utils/json_depth.h"

namespace nanovllm {
namespace fs = std::filesystem;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated when the file was opened: no overflow
  return n;
}

namespace {
using nlohmann::json;

// The format's own cap on the header (the reference implementation refuses larger ones).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void bad_entry(const std::string& path, const std::string& name, const std::string& what) {
  throw LoadError(path + ": tensor '" + name + "': " + what);
}

DType parse_dtype(const json& v, const std::string& path, const std::string& name) {
  if (!v.is_string())
    bad_entry(path, name, std::string("\"dtype\" must be a string such as \"BF16\" (got ") + v.type_name() + ")");
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "F32") return DType::F32;
  if (s == "BF16") return DType::BF16;
  if (s == "F16") return DType::F16;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  if (s == "F8_E4M3") return DType::F8E4M3;
  if (s == "I8") return DType::I8;  // e.g. compressed-tensors' unpacked zero points
  if (s == "U8") return DType::U8;
  if (s == "BOOL") return DType::U8;  // one byte per value (EAGLE-3 heads' t2d mask)
  throw LoadError(path + ": tensor '" + name + "' has unsupported dtype " + s +
                  " (supported: F32, BF16, F16, I32, I64, F8_E4M3, I8, U8, BOOL)");
}

std::vector<int64_t> parse_shape(const json& v, const std::string& path, const std::string& name) {
  if (!v.is_array())
    bad_entry(path, name, std::string("\"shape\" must be an array of sizes (got ") + v.type_name() + ")");
  std::vector<int64_t> shape;
  for (const auto& d : v) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      bad_entry(path, name, "\"shape\" " + v.dump() + " is not a list of non-negative integers");
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  RegularFile file(path);  // refuses FIFOs, directories, devices (a FIFO would block forever)
  size_ = file.size;
  if (size_ < 8)
    throw LoadError(path + ": truncated safetensors file (" + std::to_string(size_) +
                    " bytes, need at least 8 for the header length)");
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw LoadError(path + ": mmap failed");
  }
  try {
    auto* bytes = static_cast<const uint8_t*>(map_);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | bytes[i];
    if (hlen > size_ - 8)
      throw LoadError(path + ": header length " + std::to_string(hlen) + " exceeds file size " + std::to_string(size_) +
                      " (truncated or corrupt file)");
    if (hlen > kMaxHeaderBytes)
      throw LoadError(path + ": header length " + std::to_string(hlen) + " exceeds the format's limit of " +
                      std::to_string(kMaxHeaderBytes) + " bytes (corrupt file)");
    const std::string_view header_text(reinterpret_cast<const char*>(bytes) + 8, hlen);
    if (const size_t deep = find_json_too_deep(header_text); deep != std::string::npos)
      throw LoadError(path + ": header nests JSON deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels at byte offset " + std::to_string(8 + deep) + " (corrupt file)");
    json header;
    try {
      header = json::parse(header_text);
    } catch (const json::parse_error& e) {
      throw LoadError(path + ": header is not valid JSON at byte offset " +
                      std::to_string(8 + (e.byte ? e.byte - 1 : 0)) + " (corrupt file)");
    } catch (const json::exception& e) {  // out_of_range: a number past a double's range
      throw LoadError(path + ": header: " + e.what() + " (corrupt file)");
    }
    if (!header.is_object()) throw LoadError(path + ": header is not a JSON object");
    const size_t data_start = 8 + hlen, data_size = size_ - data_start;
    std::vector<std::pair<size_t, size_t>> ranges;
    for (auto& [name, v] : header.items()) {
      if (name == "__metadata__") {
        if (!v.is_object())
          throw LoadError(path + ": \"__metadata__\" must be an object (got " + std::string(v.type_name()) + ")");
        continue;
      }
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        throw LoadError(path + ": tensor '" + name + "' lacks dtype/shape/data_offsets");
      TensorInfo t;
      t.name = name;
      t.file = path;
      t.dtype = parse_dtype(v["dtype"], path, name);
      t.shape = parse_shape(v["shape"], path, name);
      auto& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        throw LoadError(path + ": tensor '" + name + "' has invalid data_offsets");
      const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
      if (b > e || e > data_size)
        throw LoadError(path + ": tensor '" + name + "' data range [" + std::to_string(b) + ", " + std::to_string(e) +
                        ") lies outside the data section of " + std::to_string(data_size) +
                        " bytes (truncated or corrupt file)");
      const auto numel = checked_numel(t.shape);
      const auto need = numel ? checked_mul(*numel, int64_t(dtype_size(t.dtype))) : std::nullopt;
      if (!need)
        throw LoadError(path + ": tensor '" + name + "' has shape " + v["shape"].dump() +
                        ", whose size does not fit in 64 bits (corrupt file)");
      if (uint64_t(*need) != e - b)
        throw LoadError(path + ": tensor '" + name + "' has " + std::to_string(e - b) +
                        " bytes but its shape and dtype need " + std::to_string(*need));
      t.data = bytes + data_start + b;
      t.nbytes = e - b;
      ranges.emplace_back(b, e);
      tensors_.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        throw LoadError(path + ": overlapping tensor data ranges at byte offset " + std::to_string(ranges[i].first));
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
  std::error_code ec;
  if (fs::exists(index, ec)) {
    const std::string where = index.string();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_regular_file(where, kMaxModelJsonBytes));
    } catch (const nlohmann::json::exception& e) {
      throw LoadError(where + ": invalid JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw LoadError(where + ": missing 'weight_map' object");
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw LoadError(where + ": weight_map['" + name + "'] must be a file name string (got " +
                        std::string(file.type_name()) + ")");
      // A shard is a file of this directory: no absolute paths, no way out through "..".
      const fs::path rel(file.get_ref<const std::string&>());
      const bool escapes = std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
      if (rel.empty() || rel.is_absolute() || escapes)
        throw LoadError(where + ": weight_map['" + name + "'] = '" + rel.string() +
                        "' does not name a file inside the model directory");
      std::string p = (fs::path(dir) / rel).string();
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors", ec) ||
             fs::is_symlink(fs::path(dir) / "model.safetensors", ec)) {
    paths.push_back((fs::path(dir) / "model.safetensors").string());
  } else {
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) throw LoadError(dir + ": no *.safetensors weights found");
  for (auto& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (auto& [name, info] : files_.back()->tensors()) {
      auto [it, fresh] = index_.emplace(name, &info);
      if (!fresh)
        throw LoadError(p + ": tensor '" + name + "' is also in " + it->second->file +
                        " (which copy to load is ambiguous)");
    }
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

int64_t SafetensorsCheckpoint::num_elements() const {
  int64_t n = 0;
  for (auto& [name, t] : index_) n = checked_add(n, t->numel()).value_or(INT64_MAX);
  return n;
}

}  // namespace nanovllm
