// Jinja lexer: HF-style preprocessing (with an offset map back to the source) + tokenization.
// The rules below are those of @huggingface/jinja's lexer.ts, re-expressed over UTF-8 bytes.
#include "nanovllm/jinja/lexer.h"

#include <array>
#include <cctype>

#include "nanovllm/jinja/text.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::jinja {

const char* tok_name(Tok t) {
  static constexpr std::array<const char*, 25> names = {
      "text",   "number", "string", "identifier", "'='",      "'('",  "')'",        "'{%'",
      "'%}'",   "'{{'",   "'}}'",   "'['",        "']'",      "'{'",  "'}'",        "','",
      "'.'",    "':'",    "'|'",    "operator",   "operator", "'**'", "comparison", "unary operator",
      "comment"};
  return names[static_cast<size_t>(t)];
}

std::string line_col(std::string_view source, uint32_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

namespace {

// Text plus, for every byte, its offset in the original source (off.back() = end of source).
struct Mapped {
  std::string s;
  std::vector<uint32_t> off;
  void push(char c, uint32_t o) {
    s += c;
    off.push_back(o);
  }
};

Mapped initial(std::string_view src) {
  Mapped m;
  size_t n = src.size();
  if (n > 0 && src[n - 1] == '\n') --n;  // a single trailing newline is dropped
  for (size_t i = 0; i < n; ++i) m.push(src[i], static_cast<uint32_t>(i));
  m.off.push_back(static_cast<uint32_t>(n));
  return m;
}

bool line_terminator_before(const std::string& s, size_t i) {
  if (i == 0) return true;
  if (s[i - 1] == '\n' || s[i - 1] == '\r') return true;  // JS /m: \n \r U+2028 U+2029
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 && (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
Mapped lstrip_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size();) {
    if (line_terminator_before(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        out.push(s[j], in.off[j]);
        out.push(s[j + 1], in.off[j + 1]);
        i = j + 2;
        continue;
      }
    }
    out.push(s[i], in.off[i]);
    ++i;
  }
  out.off.push_back(in.off.back());
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1"
Mapped trim_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size();) {
    if ((s[i] == '#' || s[i] == '%' || s[i] == '-') && i + 2 < s.size() && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.push(s[i], in.off[i]);
      out.push(s[i + 1], in.off[i + 1]);
      i += 3;
      continue;
    }
    out.push(s[i], in.off[i]);
    ++i;
  }
  out.off.push_back(in.off.back());
  return out;
}

size_t space_run(const std::string& s, size_t i) {
  size_t j = i;
  while (size_t n = js_space_len_at(s, j)) j += n;
  return j;
}

// If s[i..] is `{%-? (end)?generation -?%}`, returns its end and the two '-' flags.
bool match_generation_tag(const std::string& s, size_t i, size_t& end, bool& lstrip, bool& rstrip) {
  if (s.compare(i, 2, "{%") != 0) return false;
  size_t j = i + 2;
  lstrip = j < s.size() && s[j] == '-';
  if (lstrip) ++j;
  j = space_run(s, j);
  if (s.compare(j, 3, "end") == 0 && s.compare(j + 3, 10, "generation") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return false;
  j = space_run(s, j + 10);
  rstrip = j < s.size() && s[j] == '-';
  if (rstrip) ++j;
  if (s.compare(j, 2, "%}") != 0) return false;
  end = j + 2;
  return true;
}

// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs -> before/after kept unless stripped.
Mapped strip_generation_tags(const Mapped& in) {
  const std::string& s = in.s;
  if (s.find("generation") == std::string::npos) return in;
  Mapped out;
  auto copy = [&](size_t a, size_t b) {
    for (size_t k = a; k < b; ++k) out.push(s[k], in.off[k]);
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t ws_end = space_run(s, i), tag_end;
    bool lstrip, rstrip;
    if (match_generation_tag(s, ws_end, tag_end, lstrip, rstrip)) {
      size_t after_end = space_run(s, tag_end);
      if (!lstrip) copy(i, ws_end);
      if (!rstrip) copy(tag_end, after_end);
      i = after_end;
      continue;
    }
    size_t next = ws_end > i ? ws_end : i + 1;
    copy(i, next);
    i = next;
  }
  out.off.push_back(in.off.back());
  return out;
}

struct Lexer {
  std::string_view source;  // original, for error positions
  Mapped m;
  const std::string& src;
  size_t pos = 0;
  int curly_depth = 0;
  std::vector<Token> tokens;

  Lexer(std::string_view source_, Mapped mapped) : source(source_), m(std::move(mapped)), src(m.s) {}

  uint32_t off(size_t p) const { return m.off[std::min(p, m.off.size() - 1)]; }
  [[noreturn]] void fail(const std::string& what, size_t p) const {
    throw TokenizerError("chat template syntax error: " + what + " at " + line_col(source, off(p)));
  }
  void push(Tok t, std::string v, size_t p) { tokens.push_back({t, std::move(v), off(p)}); }
  Tok last() const { return tokens.empty() ? Tok::Text : tokens.back().type; }
  bool at(std::string_view lit) const { return src.compare(pos, lit.size(), lit) == 0; }

  void strip_trailing_ws() {
    if (!tokens.empty() && tokens.back().type == Tok::Text) {
      tokens.back().value = js_trim_end(tokens.back().value);
      if (tokens.back().value.empty()) tokens.pop_back();
    }
  }
  void skip_leading_ws() {
    while (size_t n = js_space_len_at(src, pos)) pos += n;
  }

  std::string read_string(char quote, size_t start) {
    std::string out;
    while (true) {
      if (pos >= src.size()) fail("unterminated string literal", start);
      char c = src[pos];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      if (++pos >= src.size()) fail("unterminated string literal", start);
      char e = src[pos++];
      if (e == 'x' || e == 'u') {
        size_t len = e == 'x' ? 2 : 4;
        if (pos + len > src.size()) fail("invalid escape sequence in string literal", pos - 2);
        std::string hex = src.substr(pos, len);
        for (char h : hex)
          if (!std::isxdigit(static_cast<unsigned char>(h)))
            fail("invalid escape sequence \\" + std::string(1, e) + hex, pos - 2);
        char32_t cp = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
        pos += len;
        // A \uD8xx\uDCxx pair is one astral character; a lone surrogate prints as U+FFFD.
        if (cp >= 0xD800 && cp <= 0xDBFF && src.compare(pos, 2, "\\u") == 0 && pos + 6 <= src.size()) {
          std::string lo = src.substr(pos + 2, 4);
          bool ok = true;
          for (char h : lo) ok = ok && std::isxdigit(static_cast<unsigned char>(h));
          char32_t low = ok ? static_cast<char32_t>(std::stoul(lo, nullptr, 16)) : 0;
          if (low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            pos += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        append_utf8(out, cp);
        continue;
      }
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\'':
        case '"':
        case '\\': out += e; break;
        default: fail(std::string("unknown escape sequence \\") + e + " in string literal", pos - 2);
      }
    }
    ++pos;  // closing quote
    return out;
  }

  std::string read_digits() {
    size_t s = pos;
    while (pos < src.size() && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
    return src.substr(s, pos - s);
  }
  // Optional ".digits" fraction after an integer part.
  void read_fraction(std::string& num) {
    if (pos + 1 < src.size() && src[pos] == '.' && std::isdigit(static_cast<unsigned char>(src[pos + 1]))) {
      ++pos;
      num += '.';
      num += read_digits();
    }
  }

  bool lex_comment() {
    size_t start = pos;
    pos += 2;
    bool strip_before = pos < src.size() && src[pos] == '-';
    if (strip_before) ++pos;
    size_t close = src.find("#}", pos);
    if (close == std::string::npos) fail("unclosed comment '{#'", start);
    std::string body = src.substr(pos, close - pos);
    bool strip_after = !body.empty() && body.back() == '-';
    if (strip_after) body.pop_back();
    if (strip_before) strip_trailing_ws();
    push(Tok::Comment, body, start);
    pos = close + 2;
    if (strip_after) skip_leading_ws();
    return true;
  }

  void run() {
    static const std::vector<std::pair<std::string_view, Tok>> table = {
        {"{%", Tok::OpenStmt},      {"%}", Tok::CloseStmt},
        {"{{", Tok::OpenExpr},      {"}}", Tok::CloseExpr},
        {"(", Tok::LParen},         {")", Tok::RParen},
        {"{", Tok::LBrace},         {"}", Tok::RBrace},
        {"[", Tok::LBracket},       {"]", Tok::RBracket},
        {",", Tok::Comma},          {".", Tok::Dot},
        {":", Tok::Colon},          {"|", Tok::Pipe},
        {"<=", Tok::Comparison},    {">=", Tok::Comparison},
        {"==", Tok::Comparison},    {"!=", Tok::Comparison},
        {"<", Tok::Comparison},     {">", Tok::Comparison},
        {"+", Tok::Additive},       {"-", Tok::Additive},
        {"~", Tok::Additive},       {"**", Tok::Power},
        {"*", Tok::Multiplicative}, {"//", Tok::Multiplicative},
        {"/", Tok::Multiplicative}, {"%", Tok::Multiplicative},
        {"=", Tok::Equals}};
    while (pos < src.size()) {
      Tok lt = last();
      if (tokens.empty() || lt == Tok::CloseStmt || lt == Tok::CloseExpr || lt == Tok::Comment) {
        size_t s = pos;
        while (pos < src.size() && !(src[pos] == '{' && pos + 1 < src.size() &&
                                     (src[pos + 1] == '%' || src[pos + 1] == '{' || src[pos + 1] == '#')))
          ++pos;
        if (pos > s) {
          push(Tok::Text, src.substr(s, pos - s), s);
          continue;
        }
      }
      if (at("{#")) {
        lex_comment();
        continue;
      }
      if (at("{%-") || at("{{-")) {
        strip_trailing_ws();
        bool stmt = src[pos + 1] == '%';
        push(stmt ? Tok::OpenStmt : Tok::OpenExpr, stmt ? "{%" : "{{", pos);
        if (!stmt) curly_depth = 0;
        pos += 3;
        continue;
      }
      skip_leading_ws();
      if (pos >= src.size()) fail("unexpected end of template inside a tag", pos);
      if (at("-%}") || at("-}}")) {
        bool stmt = src[pos + 1] == '%';
        push(stmt ? Tok::CloseStmt : Tok::CloseExpr, stmt ? "%}" : "}}", pos);
        pos += 3;
        skip_leading_ws();
        continue;
      }
      size_t start = pos;
      char c = src[pos];
      if (c == '-' || c == '+') {
        if (tokens.empty() || lt == Tok::Text) fail(std::string("unexpected character '") + c + "'", pos);
        bool binary =
            lt == Tok::Ident || lt == Tok::Number || lt == Tok::String || lt == Tok::RParen || lt == Tok::RBracket;
        if (!binary) {
          ++pos;
          std::string num = read_digits();
          if (!num.empty()) read_fraction(num);
          if (num.empty())
            push(Tok::Unary, std::string(1, c), start);
          else
            push(Tok::Number, std::string(1, c) + num, start);
          continue;
        }
      }
      bool matched = false;
      for (const auto& [seq, type] : table) {
        if (seq == "}}" && curly_depth > 0) continue;
        if (!at(seq)) continue;
        push(type, std::string(seq), pos);
        if (type == Tok::OpenExpr)
          curly_depth = 0;
        else if (type == Tok::LBrace)
          ++curly_depth;
        else if (type == Tok::RBrace)
          --curly_depth;
        pos += seq.size();
        matched = true;
        break;
      }
      if (matched) continue;
      if (c == '\'' || c == '"') {
        ++pos;
        push(Tok::String, read_string(c, start), start);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        std::string num = read_digits();
        if (lt != Tok::Dot) read_fraction(num);
        push(Tok::Number, num, start);
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
        push(Tok::Ident, src.substr(start, pos - start), start);
      } else {
        size_t p = pos;
        std::string ch;
        next_code_point(src, p);
        ch = src.substr(pos, p - pos);
        fail("unexpected character '" + ch + "'", pos);
      }
    }
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  Mapped m = strip_generation_tags(trim_blocks(lstrip_blocks(initial(source))));
  Lexer lx(source, std::move(m));
  lx.run();
  return std::move(lx.tokens);
}

}  // namespace nanovllm::jinja
