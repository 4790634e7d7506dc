// Text helpers: UTF-8 decoding, JavaScript whitespace and case rules, JS number printing.
#include "nanovllm/jinja/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

namespace nanovllm::jinja {

char32_t next_code_point(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < len; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<std::string> split_code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    next_code_point(s, i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t js_space_len_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t j = i;
  return is_js_space(next_code_point(s, j)) ? j - i : 0;
}

std::string js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_len_at(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string js_trim_end(std::string_view s) {
  size_t end = 0;  // one past the last non-space code point
  for (size_t i = 0; i < s.size();) {
    if (!is_js_space(next_code_point(s, i))) end = i;
  }
  return std::string(s.substr(0, end));
}

int64_t utf16_length(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) n += next_code_point(s, i) >= 0x10000 ? 2 : 1;
  return n;
}

namespace {
template <class F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_utf8(out, f(next_code_point(s, i)));
  return out;
}
bool is_ascii_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
}  // namespace

std::string to_upper(std::string_view s) {
  return map_code_points(s, [](char32_t c) { return static_cast<char32_t>(utf8proc_toupper(c)); });
}
std::string to_lower(std::string_view s) {
  return map_code_points(s, [](char32_t c) { return static_cast<char32_t>(utf8proc_tolower(c)); });
}

std::string title_case(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_ascii_word(out[i]) && (i == 0 || !is_ascii_word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z')
      out[i] = static_cast<char>(out[i] - 'a' + 'A');
  }
  return out;
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t i = 0;
  char32_t first = next_code_point(s, i);
  std::string out;
  append_utf8(out, static_cast<char32_t>(utf8proc_toupper(first)));
  out += s.substr(i);
  return out;
}

// ECMAScript Number::toString(10): shortest digits, fixed notation for exponents in [-7, 21).
std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;  // value = 0.d1d2..dk * 10^n
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return sign + out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  char hex[16];
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20) {
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
          out += hex;
        } else if (ensure_ascii && cp >= 0x7F) {
          // JavaScript escapes UTF-16 code units: astral characters become a surrogate pair.
          if (cp >= 0x10000) {
            char32_t v = cp - 0x10000;
            std::snprintf(hex, sizeof hex, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
          }
          out += hex;
        } else {
          out.append(s.substr(start, i - start));
        }
    }
  }
  return out + "\"";
}

}  // namespace nanovllm::jinja
