// Opening model files without trusting them. Every file of a model directory must be a regular
// file (a symlink to one is fine, as in the Hugging Face cache): a FIFO would block the open or
// the read forever, and a directory or a device is never a model file. The check is made on the
// opened descriptor (opened non-blocking), so nothing can be swapped in between.
#pragma once
#include <cstddef>
#include <string>

namespace nanovllm {

// A read-only descriptor of the regular file `path` and its size. Throws LoadError naming the
// file otherwise (missing, unreadable, FIFO, directory, device, socket).
struct RegularFile {
  int fd = -1;
  size_t size = 0;
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
};

// The whole content of the regular file `path`, which may be at most `max_bytes` long (JSON
// configs and indexes; a hostile multi-gigabyte one is refused before it is read).
std::string read_regular_file(const std::string& path, size_t max_bytes);

// The cap for the JSON files of a model directory (config.json, generation_config.json,
// model.safetensors.index.json): real ones are kilobytes.
constexpr size_t kMaxModelJsonBytes = size_t(64) << 20;

}  // namespace nanovllm
