// PCRE2 wrapper. The tokenizer regexes need \p{L}/\p{N}, (?i:...) groups and lookahead, which
// PCRE2 supports natively; PCRE2_UCP makes \s, \w and case folding Unicode-aware.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "nanovllm/tokenizer/regex.h"

#include <pcre2.h>

#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

// Unicode White_Space, which is what \s means to Hugging Face tokenizers (Oniguruma) and Rust's
// regex. PCRE2's UCP \s differs on U+180E (it also takes the "horizontal space" list).
constexpr const char* kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Rewrites \s and \S (outside character classes) and \s (inside them) to kWhiteSpace.
std::string with_unicode_whitespace(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'Q') {  // \Q...\E is literal text: copy it untouched
        const size_t end = pattern.find("\\E", i);
        const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
        out += pattern.substr(i - 1, stop - (i - 1));
        i = stop - 1;
      } else if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct RegexScratch::Impl {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* big_stack = nullptr;       // created on first JIT stack overflow
  pcre2_match_context* context = nullptr;
  ~Impl() {
    pcre2_match_data_free(data);
    if (big_stack) pcre2_jit_stack_free(big_stack);
    if (context) pcre2_match_context_free(context);
  }
};

RegexScratch::RegexScratch() : impl_(std::make_unique<Impl>()) {
  if (!impl_->data) throw std::bad_alloc();
}
RegexScratch::~RegexScratch() = default;

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  const std::string rewritten = with_unicode_whitespace(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw TokenizerError("tokenizer.json: cannot compile regex /" + pattern + "/ at offset " +
                         std::to_string(err_offset) + ": " + reinterpret_cast<char*>(msg));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

bool Regex::find(std::string_view text, size_t from, RegexScratch& scratch, size_t* begin,
                 size_t* end) const {
  auto* s = scratch.impl_.get();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (from < text.size()) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), from, 0, s->data, s->context)
                        : pcre2_match(impl_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK,
                                      s->data, s->context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !s->big_stack) {
      // Rare: a very long match needs more than the default 32 KiB JIT stack.
      s->big_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      s->context = pcre2_match_context_create(nullptr);
      if (!s->big_stack || !s->context) throw std::bad_alloc();
      pcre2_jit_stack_assign(s->context, nullptr, s->big_stack);
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw TokenizerError(std::string("pre-tokenizer regex failed: ") + reinterpret_cast<char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s->data);
    if (ov[1] > ov[0]) {
      *begin = ov[0];
      *end = ov[1];
      return true;
    }
    // Empty match: skip one character and search again (empty pieces carry no text).
    const size_t n = utf8::sequence_length(text, ov[0]);
    from = ov[0] + (n ? n : 1);
  }
  return false;
}

std::string Regex::quote(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                       (c >= 'A' && c <= 'Z') || c == '_';
    if (!plain) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace nanovllm
