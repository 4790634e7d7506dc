// The version `nanovllm --version` prints and the server's /version answers.
#pragma once

namespace nanovllm {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace nanovllm
