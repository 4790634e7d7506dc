// libFuzzer target for the safetensors reader (SafetensorsFile: the 8-byte header length, the
// JSON header, dtypes, shapes and data offsets checked against the file): any bytes either open
// as a file whose every tensor lies inside it, or throw LoadError naming the problem. Nothing
// crashes or reads out of bounds (ASan), and no other exception escapes.
// Build and run: scripts/fuzz.sh (seeds in tests/fuzz/corpus/safetensors).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace {

const std::string& scratch_file() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("nanovllm-fuzz-" + std::to_string(getpid()) + ".safetensors"))
          .string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(scratch_file(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    nanovllm::SafetensorsFile sf(scratch_file());
    for (auto& [name, t] : sf.tensors()) {
      // Touch the first and last byte of every tensor: ASan checks they lie inside the mapping.
      const auto* bytes = static_cast<const volatile uint8_t*>(t.data);
      if (t.nbytes > 0) (void)(bytes[0] ^ bytes[t.nbytes - 1]);
    }
  } catch (const nanovllm::UserError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "safetensors: an exception other than LoadError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
