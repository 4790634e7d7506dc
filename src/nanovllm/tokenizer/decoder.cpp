// The decoder chain of TokenDecoder, step by step as Hugging Face tokenizers' decode_chain: each
// step maps the list of token strings to a new list; the text is their concatenation.
#include "nanovllm/tokenizer/decoder.h"

#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

constexpr int kMaxNesting = 64;  // as the other components: hostile files must not overflow the stack

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// "<0xAB>" -> 0xAB; -1 for anything else.
int byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  // Rust's u8::from_str_radix, which Hugging Face uses, also takes a leading '+'.
  std::string_view hex = t.substr(3, 2);
  if (hex[0] == '+') hex.remove_prefix(1);
  int v = 0;
  for (char c : hex) {
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

// Removes up to `n` copies of `c` from the front (or the back) of s.
void strip(std::string& s, std::string_view c, int start, int stop) {
  if (c.empty()) return;
  for (int i = 0; i < start && s.size() >= c.size() && s.compare(0, c.size(), c) == 0; ++i) s.erase(0, c.size());
  for (int i = 0; i < stop && s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0; ++i)
    s.erase(s.size() - c.size());
}

}  // namespace

TokenDecoder::TokenDecoder(const nlohmann::json& config, bool* byte_level) {
  if (config.is_null()) return;
  none_ = false;
  add(config, 1, byte_level);
}

void TokenDecoder::add(const nlohmann::json& config, int depth, bool* byte_level) {
  if (depth > kMaxNesting)
    throw TokenizerError("tokenizer.json: decoder Sequences nested deeper than " + std::to_string(kMaxNesting) +
                         " levels");
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw TokenizerError("tokenizer.json: decoder without a \"type\"");
  const std::string type = config["type"];
  auto string_field = [&](const char* key, const char* fallback) -> std::string {
    if (!config.contains(key)) {
      if (fallback) return fallback;
      throw TokenizerError("tokenizer.json: " + type + " decoder without \"" + key + "\"");
    }
    if (!config[key].is_string())
      throw TokenizerError("tokenizer.json: " + type + " decoder's \"" + key + "\" is not a string");
    return config[key].get<std::string>();
  };
  if (type == "Sequence") {
    if (!config.contains("decoders") || !config["decoders"].is_array())
      throw TokenizerError("tokenizer.json: Sequence decoder without \"decoders\"");
    for (const auto& d : config["decoders"]) add(d, depth + 1, byte_level);
  } else if (type == "ByteLevel") {
    *byte_level = true;
    steps_.push_back({Kind::ByteLevel, "", ""});
  } else if (type == "Replace") {
    const auto& pattern = config.value("pattern", nlohmann::json());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string())
      throw TokenizerError("tokenizer.json: Replace decoder supports only a String pattern");
    steps_.push_back({Kind::Replace, pattern["String"].get<std::string>(), string_field("content", nullptr)});
  } else if (type == "ByteFallback") {
    steps_.push_back({Kind::ByteFallback, "", ""});
  } else if (type == "Fuse") {
    steps_.push_back({Kind::Fuse, "", ""});
  } else if (type == "Strip") {
    Step s{Kind::Strip, string_field("content", " "), ""};
    for (const char* key : {"start", "stop"}) {
      const auto& v = config.value(key, nlohmann::json(0));
      if (!v.is_number_unsigned() || v.get<uint64_t>() > 1024)
        throw TokenizerError(std::string("tokenizer.json: Strip decoder's \"") + key + "\" is not a count");
      (key[2] == 'a' ? s.start : s.stop) = v.get<int>();
    }
    steps_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    Step s{Kind::Metaspace, string_field("replacement", "\xE2\x96\x81"), ""};
    const std::string scheme = config.contains("prepend_scheme")        ? string_field("prepend_scheme", nullptr)
                               : config.value("add_prefix_space", true) ? "always"
                                                                        : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
      throw TokenizerError("tokenizer.json: Metaspace decoder with unknown prepend_scheme '" + scheme + "'");
    s.prepend = scheme != "never";
    steps_.push_back(std::move(s));
  } else {
    throw TokenizerError("tokenizer.json: unsupported decoder type '" + type + "'");
  }
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string text;
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::ByteLevel: break;  // not reached: byte-level vocabularies decode from raw bytes
      case Kind::Replace:
        for (std::string& t : tokens) replace_all(t, step.a, step.b);
        break;
      case Kind::Strip:
        for (std::string& t : tokens) strip(t, step.a, step.start, step.stop);
        break;
      case Kind::Metaspace:  // as Hugging Face: in the first token every replacement char goes
        for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], step.a, i == 0 && step.prepend ? "" : " ");
        break;
      case Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::ByteFallback: {
        // Runs of "<0xAB>" tokens become their bytes when those form valid UTF-8, else one U+FFFD
        // per byte.
        std::vector<std::string> out;
        std::string bytes;
        size_t run = 0;
        auto flush = [&] {
          if (run == 0) return;
          if (utf8::find_invalid(bytes) == utf8::kValid) {
            out.push_back(bytes);
          } else {
            for (size_t i = 0; i < run; ++i) out.emplace_back(utf8::kReplacement);
          }
          bytes.clear();
          run = 0;
        };
        for (std::string& t : tokens) {
          const int b = byte_token(t);
          if (b >= 0) {
            bytes.push_back(static_cast<char>(b));
            ++run;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
    }
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace nanovllm
