// Unicode normalizers on top of utf8proc. Pure ASCII is invariant under every form we support,
// which lets the common case skip utf8proc entirely.
//
// Hugging Face's normalizers follow Unicode 9.0: characters that later versions decompose,
// reorder or compose (U+07FD, a combining mark of Unicode 11, say) are plain starters to them,
// which no normalization moves, changes or reaches across. So the text is cut at those
// characters (unicode::normalization_inert(), generated from the oracle), the parts between are
// normalized by utf8proc (Unicode 15) and the cut characters are kept as they are.
#include "nanovllm/tokenizer/normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "nanovllm/tokenizer/code_point_set.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

// Deeper than any tokenizer.json that Hugging Face reads (serde_json stops at 128 JSON levels,
// two per Sequence); the bound keeps hostile files from overflowing the stack.
constexpr int kMaxNesting = 64;

// utf8proc_map of `in` with `options`, appended to `out`.
void map_into(std::string_view in, int options, std::string& out) {
  if (in.empty()) return;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()), static_cast<utf8proc_ssize_t>(in.size()),
                   &mapped, static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (n < 0) throw TokenizerError(std::string("normalizer: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

// Normalizes valid UTF-8 `in` into `out` (cleared first), leaving the inert characters alone.
void normalize(std::string_view in, int options, std::string& out) {
  static const unicode::CodePointSet inert(
      {unicode::normalization_inert().begin(), unicode::normalization_inert().end()});
  out.clear();
  size_t part = 0, n = 0;  // in[part..] is not yet normalized
  for (size_t at = inert.find(in, 0, &n); at < in.size(); at = inert.find(in, part, &n)) {
    map_into(in.substr(part, at - part), options, out);
    out.append(in.substr(at, n));
    part = at + n;
  }
  map_into(in.substr(part), options, out);
}

}  // namespace

Normalizer::Normalizer(const nlohmann::json& config) {
  if (!config.is_null()) add(config, 1);
}

void Normalizer::add(const nlohmann::json& config, int depth) {
  if (depth > kMaxNesting)
    throw TokenizerError("tokenizer.json: normalizer Sequences nested deeper than " + std::to_string(kMaxNesting) +
                         " levels");
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw TokenizerError("tokenizer.json: normalizer without a \"type\"");
  const std::string type = config["type"];
  constexpr int kBase = UTF8PROC_STABLE;
  auto form = [&](int options) { steps_.push_back({options, false, "", ""}); };
  if (type == "NFC") {
    form(kBase | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    form(kBase | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    form(kBase | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    form(kBase | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else if (type == "Prepend") {
    if (!config.contains("prepend") || !config["prepend"].is_string())
      throw TokenizerError("tokenizer.json: Prepend normalizer without a \"prepend\" string");
    steps_.push_back({0, true, config["prepend"].get<std::string>(), ""});
  } else if (type == "Replace") {
    const auto& pattern = config.value("pattern", nlohmann::json());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string())
      throw TokenizerError("tokenizer.json: Replace normalizer supports only a String pattern");
    if (!config.contains("content") || !config["content"].is_string())
      throw TokenizerError("tokenizer.json: Replace normalizer without a \"content\" string");
    steps_.push_back({0, false, pattern["String"].get<std::string>(), config["content"].get<std::string>()});
  } else if (type == "Sequence") {
    if (!config.contains("normalizers") || !config["normalizers"].is_array())
      throw TokenizerError("tokenizer.json: Sequence normalizer without \"normalizers\"");
    for (const auto& sub : config["normalizers"]) add(sub, depth + 1);
  } else {
    throw TokenizerError("tokenizer.json: unsupported normalizer type '" + type + "'");
  }
}

std::string_view Normalizer::apply(std::string_view in, std::string& storage) const {
  if (steps_.empty()) return in;
  std::string_view cur = in;
  std::string next;
  for (const Step& step : steps_) {
    if (step.form != 0) {
      // Pure ASCII is invariant under every normalization form.
      if (std::all_of(cur.begin(), cur.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) continue;
      normalize(cur, step.form, next);
    } else if (step.prepend) {
      if (cur.empty()) continue;
      next.assign(step.a);
      next.append(cur);
    } else {
      if (step.a.empty() || cur.find(step.a) == std::string_view::npos) continue;
      next.clear();
      for (size_t pos = 0;;) {
        const size_t at = cur.find(step.a, pos);
        next.append(cur.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
        if (at == std::string_view::npos) break;
        next.append(step.b);
        pos = at + step.a.size();
      }
    }
    storage.swap(next);
    cur = storage;
  }
  return cur;
}

}  // namespace nanovllm
