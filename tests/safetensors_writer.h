// Writes safetensors files for tests that build checkpoints on the fly (no transformers needed).
#pragma once
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::test {

// name -> (dtype, shape, bytes), written as one safetensors file.
struct StTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline void write_safetensors(const std::string& path, const std::map<std::string, StTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t off = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  for (const auto& [name, t] : tensors) out << t.bytes;
}

}  // namespace nanovllm::test
