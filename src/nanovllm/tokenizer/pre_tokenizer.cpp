// Pre-tokenization as in Hugging Face tokenizers: each step maps every current piece to zero or
// more sub-pieces. Splitting marks the regex matches as delimiters and the behavior decides what
// becomes of them (own piece, dropped, glued to a neighbour).
#include "nanovllm/tokenizer/pre_tokenizer.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

// The GPT-2 pattern that ByteLevel(use_regex=true) splits with.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Deeper than any tokenizer.json that Hugging Face reads (serde_json stops at 128 JSON levels,
// two per Sequence); the bound keeps hostile files from overflowing the stack.
constexpr int kMaxNesting = 64;

std::string type_of(const nlohmann::json& config, const char* what) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw TokenizerError(std::string("tokenizer.json: ") + what + " without a \"type\"");
  return config["type"];
}

}  // namespace

PreTokenizer::PreTokenizer(const nlohmann::json& config) {
  if (!config.is_null()) add(config, 1);
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::add(const nlohmann::json& config, int depth) {
  if (depth > kMaxNesting)
    throw TokenizerError("tokenizer.json: pre_tokenizer Sequences nested deeper than " + std::to_string(kMaxNesting) +
                         " levels");
  const std::string type = type_of(config, "pre_tokenizer");
  if (type == "Sequence") {
    if (!config.contains("pretokenizers") || !config["pretokenizers"].is_array())
      throw TokenizerError("tokenizer.json: Sequence pre_tokenizer without \"pretokenizers\"");
    for (const auto& sub : config["pretokenizers"]) add(sub, depth + 1);
  } else if (type == "Split") {
    Step step;
    const auto& pattern = config.value("pattern", nlohmann::json());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = std::make_shared<Regex>(pattern["Regex"].get<std::string>());
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      step.regex = std::make_shared<Regex>(Regex::quote(pattern["String"].get<std::string>()));
    } else {
      throw TokenizerError("tokenizer.json: Split pre_tokenizer needs a Regex or String pattern");
    }
    const std::string behavior = config.value("behavior", std::string("Isolated"));
    if (behavior == "Removed")
      step.behavior = Behavior::Removed;
    else if (behavior == "Isolated")
      step.behavior = Behavior::Isolated;
    else if (behavior == "MergedWithPrevious")
      step.behavior = Behavior::MergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step.behavior = Behavior::MergedWithNext;
    else if (behavior == "Contiguous")
      step.behavior = Behavior::Contiguous;
    else
      throw TokenizerError("tokenizer.json: unsupported Split behavior '" + behavior + "'");
    step.invert = config.value("invert", false);
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    byte_level_ = true;
    Step step;
    step.add_prefix_space = config.value("add_prefix_space", false);
    if (config.value("use_regex", true)) step.regex = std::make_shared<Regex>(kGpt2Pattern);
    if (step.regex || step.add_prefix_space) steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    Step step;
    step.metaspace = config.value("replacement", std::string("\xE2\x96\x81"));
    if (step.metaspace.empty())
      throw TokenizerError("tokenizer.json: Metaspace pre_tokenizer with an empty replacement");
    std::string scheme;
    if (config.contains("prepend_scheme")) {
      if (!config["prepend_scheme"].is_string())
        throw TokenizerError("tokenizer.json: Metaspace pre_tokenizer's prepend_scheme is not a string");
      scheme = config["prepend_scheme"].get<std::string>();
    } else {
      scheme = config.value("add_prefix_space", true) ? "always" : "never";
    }
    if (scheme != "always" && scheme != "first" && scheme != "never")
      throw TokenizerError("tokenizer.json: Metaspace pre_tokenizer with unknown prepend_scheme '" + scheme + "'");
    step.prepend_always = scheme == "always";
    step.prepend_first = scheme == "first";
    if (config.value("split", true)) {
      step.regex = std::make_shared<Regex>(Regex::quote(step.metaspace));
      step.behavior = Behavior::MergedWithNext;
    }
    steps_.push_back(std::move(step));
  } else {
    throw TokenizerError("tokenizer.json: unsupported pre_tokenizer type '" + type + "'");
  }
}

void PreTokenizer::split(std::string_view text, Scratch& scratch, std::vector<std::string_view>& pieces,
                         bool at_start) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    pieces.push_back(text);
    return;
  }
  // Steps after the first re-split the pieces of the previous one. Whether the regexes may use
  // PCRE2's own Unicode tables is decided once for the whole text.
  const bool fast_ok = Regex::fast_ok_for(text);
  std::vector<std::string_view> cur{text};
  for (size_t s = 0; s < steps_.size(); ++s) {
    std::vector<std::string_view>& out = s + 1 == steps_.size() ? pieces : scratch.tmp;
    if (&out == &scratch.tmp) out.clear();
    for (std::string_view piece : cur)
      apply(steps_[s], piece, fast_ok, at_start && piece.data() == text.data(), scratch, out);
    if (s + 1 < steps_.size()) cur.swap(scratch.tmp);
  }
}

void PreTokenizer::apply(const Step& step, std::string_view piece, bool fast_ok, bool at_start, Scratch& scratch,
                         std::vector<std::string_view>& out) const {
  if (!step.metaspace.empty()) {
    std::string& m = scratch.owned.emplace_back();
    const bool prefix = (step.prepend_always || (step.prepend_first && at_start)) &&
                        !(piece.substr(0, 1) == " " || piece.substr(0, step.metaspace.size()) == step.metaspace);
    if (prefix) m = step.metaspace;
    for (char c : piece) {
      if (c == ' ')
        m += step.metaspace;
      else
        m.push_back(c);
    }
    piece = m;
  }
  if (step.add_prefix_space && !piece.empty() && piece.front() != ' ') {
    std::string& spaced = scratch.owned.emplace_back();
    spaced.reserve(piece.size() + 1);
    spaced.push_back(' ');
    spaced.append(piece);
    piece = spaced;
  }
  if (!step.regex) {
    if (!piece.empty()) out.push_back(piece);
    return;
  }

  // Walk the piece as alternating (gap, delimiter) segments.
  const size_t first_out = out.size();
  bool last_was_delim = false;  // the previous segment was a delimiter
  auto emit = [&](size_t b, size_t e, bool delim) {
    if (b == e) return;
    if (step.invert) delim = !delim;
    const std::string_view seg = piece.substr(b, e - b);
    switch (step.behavior) {
      case Behavior::Removed:
        if (!delim) out.push_back(seg);
        break;
      case Behavior::Isolated: out.push_back(seg); break;
      case Behavior::MergedWithPrevious:
        if (delim && out.size() > first_out && !last_was_delim)
          out.back() = std::string_view(out.back().data(), out.back().size() + seg.size());
        else
          out.push_back(seg);
        break;
      case Behavior::MergedWithNext:  // a delimiter absorbs the non-delimiter that follows it
        if (!delim && last_was_delim && out.size() > first_out)
          out.back() = std::string_view(out.back().data(), out.back().size() + seg.size());
        else
          out.push_back(seg);
        break;
      case Behavior::Contiguous:
        if (delim && last_was_delim && out.size() > first_out)
          out.back() = std::string_view(out.back().data(), out.back().size() + seg.size());
        else
          out.push_back(seg);
        break;
    }
    last_was_delim = delim;
  };
  size_t pos = 0, b = 0, e = 0;
  while (step.regex->find(piece, pos, scratch.regex, &b, &e, fast_ok)) {
    emit(pos, b, false);
    emit(b, e, true);
    pos = e;
  }
  emit(pos, piece.size(), false);
}

}  // namespace nanovllm
