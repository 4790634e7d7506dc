// Unicode normalizers on top of utf8proc. Pure ASCII is invariant under every form we support,
// which lets the common case skip utf8proc entirely.
#include "nanovllm/tokenizer/normalizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "nanovllm/utils/error.h"

namespace nanovllm {

Normalizer::Normalizer(const nlohmann::json& config) {
  if (!config.is_null()) add(config);
}

void Normalizer::add(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw TokenizerError("tokenizer.json: normalizer without a \"type\"");
  const std::string type = config["type"];
  constexpr int kBase = UTF8PROC_STABLE;
  if (type == "NFC") {
    forms_.push_back(kBase | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    forms_.push_back(kBase | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    forms_.push_back(kBase | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    forms_.push_back(kBase | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else if (type == "Sequence") {
    if (!config.contains("normalizers") || !config["normalizers"].is_array())
      throw TokenizerError("tokenizer.json: Sequence normalizer without \"normalizers\"");
    for (const auto& sub : config["normalizers"]) add(sub);
  } else {
    throw TokenizerError("tokenizer.json: unsupported normalizer type '" + type + "'");
  }
}

std::string_view Normalizer::apply(std::string_view in, std::string& storage) const {
  if (forms_.empty()) return in;
  bool ascii = true;
  for (char c : in) {
    if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
  }
  if (ascii) return in;
  std::string_view cur = in;
  for (int options : forms_) {
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                            static_cast<utf8proc_ssize_t>(cur.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    if (n < 0)
      throw TokenizerError(std::string("normalizer: ") + utf8proc_errmsg(n));
    storage.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    cur = storage;
  }
  return cur;
}

}  // namespace nanovllm
