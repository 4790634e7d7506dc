// The engine settings table: every EngineConfig field a user sets is declared once here (name,
// type, values, help, CLI spellings including vLLM's, Python LLM(...) keywords, whether rank 0
// sends it to the tensor-parallel workers) with typed access to its field. From the table come
// the CLI flags of every engine subcommand (apps/nanovllm/engine_flags.cpp), the Python keywords
// (python/_core/module.cpp, python/nanovllm/config.py), the tensor-parallel settings message
// (engine/tp_protocol.cpp), --help and the README's settings table (settings_markdown, printed by
// `nanovllm settings --markdown`). llama.cpp's common/arg.cpp and vLLM's EngineArgs are the same idea.
//
// Adding a setting: a field in EngineConfig (config.h), an entry in settings_table.cpp, and the code
// that uses it; then regenerate the README table (a test compares it).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nanovllm/config/config.h"

namespace nanovllm {

enum class SettingType {
  Bool,          // a flag; with off_flag a pair (--enable-x / --no-enable-x)
  OptionalBool,  // as Bool, unset by default (the engine decides)
  Int,
  Float,
  Text,
  Choice,  // one of `choices` (parsed into an enum)
};

// A value as the CLI, Python and the wire carry it; monostate: unset (OptionalBool, or None from
// Python where the keyword takes None).
using SettingValue = std::variant<std::monostate, bool, int64_t, double, std::string>;

struct Setting {
  std::string name{};  // the key on the wire and in the README; the field's name where it has one
  SettingType type = SettingType::Text;
  std::string help{};
  std::vector<std::string> flags{};     // CLI spellings, canonical first ("--tensor-parallel-size", "-tp")
  std::string off_flag{}, off_help{};   // Bool / OptionalBool: the spelling that turns it off
  std::vector<std::string> keywords{};  // Python LLM(...) keywords (empty: none)
  bool python_none = false;             // the keywords also take None (= leave unset)
  std::vector<std::string> choices{};   // Choice: the values shown (the accepted ones may be more)
  std::string range{};                  // shown with the help ("> 0", "[0, 65535]")
  bool travels = false;                 // rank 0 sends it to the tensor-parallel workers
  bool size_suffixes = false;           // Int: the CLI takes vLLM's 32k (10^3) / 32K (2^10) ... T suffixes
  std::string shown_default{};          // the default as shown, where the value's text is not apt
  std::function<SettingValue(const EngineConfig&)> get{};
  std::function<void(const Setting&, EngineConfig&, const SettingValue&)> assign{};  // use set()
  std::function<void(const Setting&, const EngineConfig&)> check{};  // its own range (validate); may be empty

  // "--max-num-seqs": how messages name it (the Python layer rewrites it to the keyword).
  std::string flag() const;
  // Sets the field; throws UserError naming flag() for a value of the wrong type or out of range.
  void set(EngineConfig& cfg, const SettingValue& v) const { assign(*this, cfg, v); }
  // The default's text for --help and the README.
  std::string default_text() const;
};

const std::vector<Setting>& engine_settings();
// Throws std::out_of_range for an unknown name (a programming error: names are the table's).
const Setting& find_setting(const std::string& name);

// "true", "16", "0.9", "fp8_e4m3"; "" for unset.
std::string setting_text(const SettingValue& v);
// vLLM's human_readable_int: "25.6k" = 25600 (k m g t: powers of 10, decimals allowed), "32K" =
// 32768 (K M G T: powers of 2, whole numbers only), else a plain integer; nullopt if none of these.
std::optional<int64_t> parse_size_suffixed(const std::string& text);
// The CLI's text for `s` as a value of its type; throws UserError naming the flag.
SettingValue parse_setting_text(const Setting& s, const std::string& text);
// parse_setting_text, then set.
void set_setting_text(const Setting& s, EngineConfig& cfg, const std::string& text);

// The README's table: one row per setting (CLI flags, Python keywords, values, default, help).
std::string settings_markdown();

}  // namespace nanovllm
