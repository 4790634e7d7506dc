// tokenizer.json "pre_tokenizer": splits normalized text into pieces that BPE encodes one by one.
// Supported: Split (Regex or String pattern, every behavior, invert), ByteLevel (add_prefix_space,
// use_regex with the GPT-2 pattern), Metaspace (SentencePiece-style: spaces become U+2581, a prefix
// by prepend_scheme, optional split before each U+2581) and Sequence of those. Pieces are byte strings: the ByteLevel
// byte->char mapping is not materialized, the BPE model works on raw bytes instead.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/regex.h"

namespace nanovllm {

class PreTokenizer {
 public:
  // Per-call state: regex match data and storage for pieces that are not views of the input.
  struct Scratch {
    RegexScratch regex;
    std::deque<std::string> owned;
    std::vector<std::string_view> tmp;
  };

  // `config` is the "pre_tokenizer" value (may be null). Throws TokenizerError on unsupported types.
  explicit PreTokenizer(const nlohmann::json& config);
  ~PreTokenizer();
  bool has_byte_level() const { return byte_level_; }

  // Appends the pieces of `text` to `pieces` (views into `text` or into scratch.owned).
  // `at_start`: text begins at offset 0 of the string being encoded (Metaspace's "first" scheme
  // prepends only there; text after an added token does not begin there).
  void split(std::string_view text, Scratch& scratch, std::vector<std::string_view>& pieces,
             bool at_start = true) const;

 private:
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    std::shared_ptr<Regex> regex;  // null: no splitting (ByteLevel without use_regex)
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
    // Metaspace: spaces -> replacement, then `replacement` prepended where the scheme says
    std::string metaspace;        // the replacement (empty: not a Metaspace step)
    bool prepend_always = false;  // prepend_scheme "always" (else "first" or "never")
    bool prepend_first = false;   // prepend_scheme "first"
  };
  void add(const nlohmann::json& config, int depth);
  void apply(const Step& step, std::string_view piece, bool fast_ok, bool at_start, Scratch& scratch,
             std::vector<std::string_view>& out) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace nanovllm
