#include "nanovllm/output/python_calls.h"

#include "nanovllm/tokenizer/utf8.h"

#include <charconv>
#include <cmath>

namespace nanovllm::output {

namespace {

using ojson = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;

struct Refused {};  // not a list of literal calls: unwinds to parse_python_calls

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  std::vector<PythonCall> calls() {
    expect('[');
    std::vector<PythonCall> out;
    while (!take(']')) {
      out.push_back(call());
      if (!take(',')) {
        expect(']');
        break;
      }
    }
    skip_space();
    if (i_ != s_.size() || out.empty()) throw Refused{};
    return out;
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool take(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) throw Refused{};
  }
  static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

  std::string identifier() {
    skip_space();
    const size_t b = i_;
    if (i_ >= s_.size() || !ident_start(s_[i_])) throw Refused{};
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }

  PythonCall call() {
    PythonCall c{identifier(), ojson::object()};
    expect('(');
    while (!take(')')) {
      const std::string key = identifier();
      expect('=');
      if (c.arguments.contains(key)) throw Refused{};  // Python: a repeated keyword argument
      c.arguments[key] = value(1);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return c;
  }

  ojson value(int depth) {
    if (depth > kMaxDepth) throw Refused{};
    skip_space();
    if (i_ >= s_.size()) throw Refused{};
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string();
    if (c == '[') {
      ++i_;
      ojson a = ojson::array();
      while (!take(']')) {
        a.push_back(value(depth + 1));
        if (!take(',')) {
          expect(']');
          break;
        }
      }
      return a;
    }
    if (c == '{') {
      ++i_;
      ojson o = ojson::object();
      while (!take('}')) {
        skip_space();
        if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) throw Refused{};
        const std::string key = string();
        expect(':');
        o[key] = value(depth + 1);  // Python keeps the last of repeated keys, at the first's place
        if (!take(',')) {
          expect('}');
          break;
        }
      }
      return o;
    }
    if (ident_start(c)) {
      const std::string w = identifier();
      if (w == "True") return true;
      if (w == "False") return false;
      if (w == "None") return nullptr;
      throw Refused{};  // a name, a call, a prefixed string (f"", r""): not a literal
    }
    return number();
  }

  ojson number() {
    const size_t b = i_;
    if (s_[i_] == '-') ++i_;
    std::string digits = b < i_ ? "-" : "";
    bool is_float = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c >= '0' && c <= '9') {
        digits += c;
      } else if (c == '_' && !digits.empty() && digits.back() != '-') {
        // a digit separator: skipped
      } else if (c == '.' || c == 'e' || c == 'E' ||
                 ((c == '+' || c == '-') && !digits.empty() && digits.back() == 'e')) {
        is_float = true;
        digits += c == 'E' ? 'e' : c;
      } else {
        break;
      }
      ++i_;
    }
    if (digits.empty() || digits == "-") throw Refused{};
    if (!is_float) {
      if (digits.size() > 1 && digits[digits[0] == '-' ? 1 : 0] == '0' &&
          digits.find_first_not_of("-0") != std::string::npos)
        throw Refused{};  // 012 is a syntax error in Python 3
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || end != digits.data() + digits.size()) throw Refused{};  // past int64
      return v;
    }
    // Python accepts "1." and ".5"; JSON and strtod want digits around the point.
    std::string text;
    for (size_t k = 0; k < digits.size(); ++k) {
      const bool digit_before = k > 0 && digits[k - 1] >= '0' && digits[k - 1] <= '9';
      const bool digit_after = k + 1 < digits.size() && digits[k + 1] >= '0' && digits[k + 1] <= '9';
      if (digits[k] == '.' && !digit_before) text += '0';
      text += digits[k];
      if (digits[k] == '.' && !digit_after) text += '0';
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) throw Refused{};
    return v;
  }

  // A code point of an escape, refused where it is no UTF-8 text (a lone surrogate, past U+10FFFF).
  static void append_utf8(std::string& out, uint32_t cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) throw Refused{};
    utf8::append_code_point(cp, out);
  }

  uint32_t hex(size_t n) {
    if (i_ + n > s_.size()) throw Refused{};
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + n, v, 16);
    if (ec != std::errc() || end != s_.data() + i_ + n) throw Refused{};
    i_ += n;
    return v;
  }

  // A one-line string literal: '...' or "..." with Python's escapes (an unknown escape keeps its
  // backslash, as Python does). Triple quotes and adjacent literals are refused.
  std::string string() {
    const char q = s_[i_++];
    if (s_.substr(i_, 2) == std::string(2, q)) throw Refused{};
    std::string out;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n') throw Refused{};
      const char c = s_[i_++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) throw Refused{};
      const char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7': {  // octal, up to 3 digits
          uint32_t v = uint32_t(e - '0');
          for (int n = 1; n < 3 && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7'; ++n)
            v = v * 8 + uint32_t(s_[i_++] - '0');
          append_utf8(out, v);
          break;
        }
        case '\\':
        case '\'':
        case '"': out += e; break;
        case '\n': break;  // a line continuation
        case 'x': append_utf8(out, hex(2)); break;
        case 'u': append_utf8(out, hex(4)); break;
        case 'U': append_utf8(out, hex(8)); break;
        case 'N': throw Refused{};  // \N{name}: no table of Unicode names here
        default: out += '\\'; out += e;
      }
    }
    skip_space();
    if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'')) throw Refused{};  // "a" "b": concatenation
    return out;
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<std::vector<PythonCall>> parse_python_calls(std::string_view text) {
  try {
    return Reader(text).calls();
  } catch (const Refused&) {
    return std::nullopt;
  }
}

}  // namespace nanovllm::output
