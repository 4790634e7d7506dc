// Where a bracketed value ends in streamed text: the tool-call parsers whose calls are a JSON
// object or array (llama3_json, mistral) or a Python list (pythonic) hold the text back until the
// bracket that opened it is closed, then parse it whole. Brackets inside strings do not count
// (JSON: "..." with \ escapes; Python: '...' and "..."). The scan is incremental: each call goes on
// from where the last one stopped, so a long value is read once, not once per delta.
#pragma once
#include <cstddef>
#include <string_view>

namespace nanovllm::output {

class BracketScanner {
 public:
  explicit BracketScanner(bool python_strings) : python_(python_strings) {}

  // `text` begins with the opening bracket and is the same text as in the last call, maybe longer.
  // Returns one past the closing bracket, or npos while the value is still open.
  size_t end_of(std::string_view text) {
    for (; pos_ < text.size(); ++pos_) {
      const char c = text[pos_];
      if (quote_) {
        if (escaped_)
          escaped_ = false;
        else if (c == '\\')
          escaped_ = true;
        else if (c == quote_)
          quote_ = 0;
      } else if (c == '"' || (python_ && c == '\'')) {
        quote_ = c;
      } else if (c == '{' || c == '[' || c == '(') {
        ++depth_;
      } else if ((c == '}' || c == ']' || c == ')') && --depth_ == 0) {
        return ++pos_;
      }
    }
    return std::string_view::npos;
  }

  void reset() { *this = BracketScanner(python_); }

 private:
  bool python_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  char quote_ = 0;
  bool escaped_ = false;
};

}  // namespace nanovllm::output
