// What every setting of the table has in common (settings.h): its flag, text, parsing, and the
// README's table. The entries themselves are in settings_table.cpp.
#include "nanovllm/config/settings.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

std::string code_list(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : ", ") + ("`" + x + "`");
  return s;
}

// "int", "bool", "`auto`, `cpu`, `cuda`": the README's values column, before the range.
std::string value_kind(const Setting& s) {
  switch (s.type) {
    case SettingType::Bool:
    case SettingType::OptionalBool: return "bool";
    case SettingType::Int: return s.size_suffixes ? "int (CLI: also 32k = 32000, 32K = 32768)" : "int";
    case SettingType::Float: return "number";
    case SettingType::Text: return "text";
    case SettingType::Choice: return code_list(s.choices);
  }
  return "?";
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string Setting::flag() const {
  if (!flags.empty()) return flags.front();
  std::string f = "--" + name;
  for (char& ch : f)
    if (ch == '_') ch = '-';
  return f;
}

std::string Setting::default_text() const {
  if (!shown_default.empty()) return shown_default;
  const std::string t = setting_text(get(EngineConfig{}));
  return t.empty() ? "unset" : t;
}

const Setting& find_setting(const std::string& name) {
  for (const Setting& s : engine_settings())
    if (s.name == name) return s;
  throw std::out_of_range("no engine setting '" + name + "'");
}

std::string setting_text(const SettingValue& v) {
  struct {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, d);  // the shortest text that reads back as d
      return std::string(buf, r.ptr);
    }
    std::string operator()(const std::string& s) const { return s; }
  } text;
  return std::visit(text, v);
}

std::optional<int64_t> parse_size_suffixed(const std::string& text) {
  if (text.size() < 2) return std::nullopt;
  const char suffix = text.back();
  const std::string number = text.substr(0, text.size() - 1);
  const std::string decimal = "kmgt", binary = "KMGT";
  const size_t dec = decimal.find(suffix), bin = binary.find(suffix);
  if (dec == std::string::npos && bin == std::string::npos) return std::nullopt;
  // number: digits, and for the decimal suffixes an optional ".digits"
  const size_t dot = number.find('.');
  auto digits = [](std::string_view v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::string_view whole = std::string_view(number).substr(0, dot);
  if (!digits(whole) || (dot != std::string::npos && (bin != std::string::npos || !digits(number.substr(dot + 1)))))
    return std::nullopt;
  const double value = std::strtod(number.c_str(), nullptr);
  const int power = int(dec != std::string::npos ? dec : bin) + 1;
  const double scale = dec != std::string::npos ? std::pow(1000.0, power) : std::pow(1024.0, power);
  if (value * scale > 9.2e18) return std::nullopt;
  return dec != std::string::npos ? int64_t(value * scale) : int64_t(std::stoll(number)) * int64_t(scale);
}

SettingValue parse_setting_text(const Setting& s, const std::string& text) {
  switch (s.type) {
    case SettingType::OptionalBool:
      if (text.empty()) return std::monostate{};
      [[fallthrough]];
    case SettingType::Bool:
      if (text == "true" || text == "1" || text == "on") return true;
      if (text == "false" || text == "0" || text == "off") return false;
      throw UserError(s.flag() + " must be true or false (got '" + text + "')");
    case SettingType::Int: {
      int64_t i = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), i);
      if (!text.empty() && r.ec == std::errc() && r.ptr == text.data() + text.size()) return i;
      if (s.size_suffixes)
        if (const auto v = parse_size_suffixed(text)) return *v;
      throw UserError(s.flag() + " must be an integer" +
                      (s.size_suffixes
                           ? std::string(", optionally with a k/m/g/t (10^3...) or K/M/G/T (2^10...) suffix")
                           : std::string()) +
                      " (got '" + text + "')");
    }
    case SettingType::Float: {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size())
        throw UserError(s.flag() + " must be a number (got '" + text + "')");
      return d;
    }
    case SettingType::Text:
    case SettingType::Choice: return text;
  }
  return text;
}

void set_setting_text(const Setting& s, EngineConfig& cfg, const std::string& text) {
  s.set(cfg, parse_setting_text(s, text));
}

std::string settings_markdown() {
  std::string md =
      "| setting | CLI | Python `LLM(...)` | values | default | to TP ranks | what it does |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const Setting& s : engine_settings()) {
    std::vector<std::string> flags = s.flags;
    if (!s.off_flag.empty()) flags.push_back(s.off_flag);
    std::string values = value_kind(s);
    if (!s.range.empty()) values += " " + s.range;
    std::string keywords = code_list(s.keywords);
    if (s.python_none && !keywords.empty()) keywords += " (or None)";
    md += "| `" + s.name + "` | " + code_list(flags) + " | " + keywords + " | " + markdown_cell(values) + " | " +
          markdown_cell(s.default_text()) + " | " + (s.travels ? "yes" : "") + " | " + markdown_cell(s.help) + " |\n";
  }
  return md;
}

}  // namespace nanovllm
