// PCRE2 wrapper. The tokenizer regexes need \p{L}/\p{N}, (?i:...) groups and lookahead, which
// PCRE2 supports natively; PCRE2_UCP makes case folding Unicode-aware. Escapes that Oniguruma
// reads differently are rewritten first (regex_rewrite.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "nanovllm/tokenizer/regex.h"

#include <pcre2.h>

#include "nanovllm/tokenizer/regex_rewrite.h"
#include "nanovllm/tokenizer/regex_unicode.h"
#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

// Compiles `rewritten` (from `pattern`) with JIT when available; throws TokenizerError.
pcre2_code* compile(const std::string& rewritten, const std::string& pattern, bool* jit) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw TokenizerError("tokenizer.json: cannot compile regex /" + pattern + "/: " + reinterpret_cast<char*>(msg) +
                         " (at offset " + std::to_string(err_offset) + " of its PCRE2 form /" +
                         rewritten.substr(0, 200) + "/)");
  }
  *jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return code;
}

}  // namespace

struct RegexScratch::Impl {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* big_stack = nullptr;  // created on first JIT stack overflow
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
  pcre2_code* fast = nullptr;
  pcre2_code* exact = nullptr;  // null when it would equal `fast`
  bool fast_jit = false, exact_jit = false;
  ~Impl() {
    pcre2_code_free(fast);
    pcre2_code_free(exact);
  }
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  const Pcre2Patterns forms = to_pcre2(pattern);
  impl_->fast = compile(forms.fast, pattern, &impl_->fast_jit);
  if (forms.exact != forms.fast) impl_->exact = compile(forms.exact, pattern, &impl_->exact_jit);
}

Regex::~Regex() = default;

bool Regex::fast_ok_for(std::string_view text) { return regex_unicode::pcre2_agrees(text); }

bool Regex::find(std::string_view text, size_t from, RegexScratch& scratch, size_t* begin, size_t* end,
                 bool fast_ok) const {
  auto* s = scratch.impl_.get();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const bool use_fast = fast_ok || !impl_->exact;
  pcre2_code* code = use_fast ? impl_->fast : impl_->exact;
  const bool jit = use_fast ? impl_->fast_jit : impl_->exact_jit;
  while (from < text.size()) {
    int rc = jit ? pcre2_jit_match(code, subject, text.size(), from, 0, s->data, s->context)
                 : pcre2_match(code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, s->data, s->context);
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
    const bool plain =
        u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!plain) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace nanovllm
