// Text helpers for the Jinja interpreter. Strings are UTF-8 bytes here, while the reference
// implementation (@huggingface/jinja) works on JavaScript (UTF-16) strings; these helpers
// reproduce the JavaScript behaviour that templates can observe: which characters count as
// whitespace for trim()/split(), how numbers print, how JSON strings are escaped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::jinja {

// Decodes the code point at s[i] and advances i; invalid bytes decode as U+FFFD (one byte).
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
std::vector<std::string> split_code_points(std::string_view s);

// JavaScript's /\s/ (and String.prototype.trim): ASCII whitespace plus the Unicode spaces.
bool is_js_space(char32_t cp);
// Length of the JavaScript whitespace run that starts at s[i] (bytes), 0 if none.
size_t js_space_len_at(std::string_view s, size_t i);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);
inline std::string js_trim(std::string_view s) { return js_trim_start(js_trim_end(s)); }

// Length as JavaScript counts it (UTF-16 code units).
int64_t utf16_length(std::string_view s);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
// JavaScript `s.replace(/\b\w/g, c => c.toUpperCase())`: ASCII word starts only.
std::string title_case(std::string_view s);
// First code point upper-cased, the rest unchanged (what @huggingface/jinja does).
std::string capitalize(std::string_view s);

// Number formatting the way JavaScript's String(number) does (shortest round trip).
std::string js_number(double v);
// JSON.stringify of a string (only ", \, and control characters are escaped).
std::string json_quote(std::string_view s, bool ensure_ascii = false);

}  // namespace nanovllm::jinja
