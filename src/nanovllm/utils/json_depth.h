// A guard for parsing untrusted JSON with nlohmann::json: its parser, copies, dump and destruction
// recurse once per nesting level, so a document of ~100,000 nested brackets (a few hundred KB)
// overflows the stack. Check the text before parsing it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace nanovllm {

// serde_json's default recursion limit: Hugging Face's Rust readers refuse anything deeper too.
inline constexpr size_t kMaxJsonDepth = 128;

// Byte offset of the first '[' or '{' nested deeper than `max_depth` in `json` (brackets inside
// strings do not count), or std::string::npos when there is none. Valid JSON is not required.
size_t find_json_too_deep(std::string_view json, size_t max_depth = kMaxJsonDepth);

}  // namespace nanovllm
