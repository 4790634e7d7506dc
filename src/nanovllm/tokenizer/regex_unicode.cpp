// PCRE2's categories are read off PCRE2 itself: one anchored pattern with a capture group per
// category, matched run after run over a string of every code point. Comparing those runs with
// the generated ones gives the code points on which the two disagree.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "nanovllm/tokenizer/regex_unicode.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <memory>
#include <utility>

#include "nanovllm/tokenizer/code_point_set.h"
#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::regex_unicode {
namespace {

using unicode::Category;
using unicode::CategoryRun;
using unicode::Range;

constexpr const char* kNames[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
                                  "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
                                  "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
static_assert(std::size(kNames) == unicode::kNumCategories);
// Category groups as masks (bit i: category i).
constexpr uint32_t kLetter = 0x1F, kCased = 0x7, kMark = 0xE0, kNumber = 0x700, kPunct = 0x3F800, kSymbol = 0x3C0000,
                   kSeparator = 0x1C00000, kOther = 0x3E000000;
constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr std::pair<uint32_t, const char*> kGroups[] = {
    {kLetter, "L"}, {kMark, "M"}, {kNumber, "N"}, {kPunct, "P"}, {kSymbol, "S"}, {kSeparator, "Z"}, {kOther, "C"}};

struct Pcre2View {
  std::vector<CategoryRun> runs;  // PCRE2's categories, in the generated table's format
  std::vector<Range> differs;     // code points whose category PCRE2 sees differently
};

// Runs of PCRE2's categories over the code points [first, last] (no surrogates among them).
void probe_runs(uint32_t first, uint32_t last, std::vector<CategoryRun>& runs) {
  std::string pattern, subject;
  for (const char* name : kNames) pattern += std::string(pattern.empty() ? "" : "|") + "(\\p{" + name + "}+)";
  for (uint32_t c = first; c <= last; ++c) utf8::append_code_point(c, subject);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code(
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &err_offset, nullptr),
      &pcre2_code_free);
  if (!code) throw TokenizerError("regex: cannot compile the PCRE2 category probe");
  pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
  uint32_t cp = first;
  for (size_t pos = 0; pos < subject.size();) {
    const int rc = pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), pos,
                               PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc < 2) throw TokenizerError("regex: PCRE2 gives no general category to U+" + std::to_string(cp));
    const auto category = static_cast<Category>(rc - 2);  // the last group that matched
    if (runs.empty() || runs.back().category != category) runs.push_back({cp, category});
    const size_t end = pcre2_get_ovector_pointer(data.get())[1];
    for (; pos < end; pos += utf8::sequence_length(subject, pos)) ++cp;
  }
}

// Calls fn(first, last, ours, theirs) for each stretch of code points on which both run lists
// are constant.
void for_each_segment(std::span<const CategoryRun> a, std::span<const CategoryRun> b,
                      const std::function<void(uint32_t, uint32_t, Category, Category)>& fn) {
  size_t i = 0, j = 0;
  uint32_t cp = 0;
  while (true) {
    const uint32_t end_a = i + 1 < a.size() ? a[i + 1].first : kMaxCp + 1;
    const uint32_t end_b = j + 1 < b.size() ? b[j + 1].first : kMaxCp + 1;
    const uint32_t end = std::min(end_a, end_b);
    fn(cp, end - 1, a[i].category, b[j].category);
    if (end > kMaxCp) return;
    cp = end;
    if (end == end_a) ++i;
    if (end == end_b) ++j;
  }
}

const Pcre2View& pcre2_view() {
  static const Pcre2View view = [] {
    Pcre2View v;
    probe_runs(0, 0xD7FF, v.runs);
    v.runs.push_back({0xD800, unicode::Cs});  // never in UTF-8 text; the probe restarts at U+E000
    probe_runs(0xE000, kMaxCp, v.runs);
    for_each_segment(unicode::category_runs(), v.runs,
                     [&](uint32_t first, uint32_t last, Category ours, Category theirs) {
                       if (ours == theirs) return;
                       if (!v.differs.empty() && v.differs.back().last + 1 == first)
                         v.differs.back().last = last;
                       else
                         v.differs.push_back({first, last});
                     });
    return v;
  }();
  return view;
}

bool in(uint32_t mask, Category c) { return (mask >> c) & 1; }

void add_range(std::vector<Range>& out, uint32_t first, uint32_t last) {
  if (!out.empty() && out.back().last + 1 >= first)
    out.back().last = std::max(out.back().last, last);
  else
    out.push_back({first, last});
}

// Sorted union of the code points of `set`, by the generated (Hugging Face) tables.
std::vector<Range> ranges_of(const CharSet& set) {
  std::vector<Range> r;
  const auto runs = unicode::category_runs();
  for (size_t i = 0; i < runs.size(); ++i)
    if (in(set.categories, runs[i].category))
      r.push_back({runs[i].first, i + 1 < runs.size() ? runs[i + 1].first - 1 : kMaxCp});
  r.insert(r.end(), set.extra.begin(), set.extra.end());
  std::sort(r.begin(), r.end(), [](const Range& x, const Range& y) { return x.first < y.first; });
  std::vector<Range> merged;
  for (const Range& x : r) add_range(merged, x.first, x.last);
  return merged;
}

// Class items for explicit ranges (surrogates left out: PCRE2 refuses them in UTF mode).
std::string spelled(const std::vector<Range>& ranges) {
  std::string out;
  char buf[40];
  for (Range r : ranges) {
    for (Range part : {Range{r.first, std::min(r.last, 0xD7FFu)}, Range{std::max(r.first, 0xE000u), r.last}}) {
      if (part.first > part.last) continue;
      if (part.first == part.last)
        std::snprintf(buf, sizeof buf, "\\x{%X}", part.first);
      else
        std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", part.first, part.last);
      out += buf;
    }
  }
  return out.empty() ? "\\p{Cs}" : out;  // an empty set: surrogates never occur in UTF-8 text
}

// PCRE2 property items for a category mask, whole groups first.
std::string property_items(uint32_t mask) {
  std::string out;
  for (auto [group, name] : kGroups) {
    if ((mask & group) != group) continue;
    out += std::string("\\p{") + name + "}";
    mask &= ~group;
  }
  for (int c = 0; c < unicode::kNumCategories; ++c)
    if (in(mask, static_cast<Category>(c))) out += std::string("\\p{") + kNames[c] + "}";
  return out;
}

}  // namespace

uint32_t category_mask(std::string_view name) {
  std::string key;
  for (char c : name)
    if (c != ' ' && c != '_' && c != '-') key += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  static const std::pair<const char*, uint32_t> kAliases[] = {{"l", kLetter},
                                                              {"letter", kLetter},
                                                              {"lc", kCased},
                                                              {"l&", kCased},
                                                              {"casedletter", kCased},
                                                              {"uppercaseletter", 1u << unicode::Lu},
                                                              {"lowercaseletter", 1u << unicode::Ll},
                                                              {"titlecaseletter", 1u << unicode::Lt},
                                                              {"modifierletter", 1u << unicode::Lm},
                                                              {"otherletter", 1u << unicode::Lo},
                                                              {"m", kMark},
                                                              {"mark", kMark},
                                                              {"combiningmark", kMark},
                                                              {"nonspacingmark", 1u << unicode::Mn},
                                                              {"spacingmark", 1u << unicode::Mc},
                                                              {"enclosingmark", 1u << unicode::Me},
                                                              {"n", kNumber},
                                                              {"number", kNumber},
                                                              {"decimalnumber", 1u << unicode::Nd},
                                                              {"letternumber", 1u << unicode::Nl},
                                                              {"othernumber", 1u << unicode::No},
                                                              {"p", kPunct},
                                                              {"punctuation", kPunct},
                                                              {"connectorpunctuation", 1u << unicode::Pc},
                                                              {"dashpunctuation", 1u << unicode::Pd},
                                                              {"openpunctuation", 1u << unicode::Ps},
                                                              {"closepunctuation", 1u << unicode::Pe},
                                                              {"initialpunctuation", 1u << unicode::Pi},
                                                              {"finalpunctuation", 1u << unicode::Pf},
                                                              {"otherpunctuation", 1u << unicode::Po},
                                                              {"s", kSymbol},
                                                              {"symbol", kSymbol},
                                                              {"mathsymbol", 1u << unicode::Sm},
                                                              {"currencysymbol", 1u << unicode::Sc},
                                                              {"modifiersymbol", 1u << unicode::Sk},
                                                              {"othersymbol", 1u << unicode::So},
                                                              {"z", kSeparator},
                                                              {"separator", kSeparator},
                                                              {"spaceseparator", 1u << unicode::Zs},
                                                              {"lineseparator", 1u << unicode::Zl},
                                                              {"paragraphseparator", 1u << unicode::Zp},
                                                              {"c", kOther},
                                                              {"other", kOther},
                                                              {"control", 1u << unicode::Cc},
                                                              {"format", 1u << unicode::Cf},
                                                              {"surrogate", 1u << unicode::Cs},
                                                              {"privateuse", 1u << unicode::Co},
                                                              {"unassigned", 1u << unicode::Cn}};
  for (const auto& [alias, mask] : kAliases)
    if (key == alias) return mask;
  for (int c = 0; c < unicode::kNumCategories; ++c) {
    const std::string short_name = {static_cast<char>(kNames[c][0] - 'A' + 'a'), kNames[c][1]};
    if (key == short_name) return 1u << c;
  }
  return 0;
}

std::string class_items(const CharSet& set, bool exact) {
  std::vector<Range> added;  // in the set by Hugging Face's tables but not by PCRE2's
  bool removed = false;      // some code point the other way round
  if (exact && set.categories) {
    for_each_segment(unicode::category_runs(), pcre2_view().runs,
                     [&](uint32_t first, uint32_t last, Category ours, Category theirs) {
                       if (in(set.categories, ours) && !in(set.categories, theirs)) add_range(added, first, last);
                       if (!in(set.categories, ours) && in(set.categories, theirs)) removed = true;
                     });
  }
  if (removed) return spelled(ranges_of(set));
  std::vector<Range> extra = set.extra;
  extra.insert(extra.end(), added.begin(), added.end());
  std::sort(extra.begin(), extra.end(), [](const Range& x, const Range& y) { return x.first < y.first; });
  std::vector<Range> merged;
  for (const Range& x : extra) add_range(merged, x.first, x.last);
  return property_items(set.categories) + (merged.empty() ? "" : spelled(merged));
}

std::string complement_items(const CharSet& set) {
  std::vector<Range> out;
  uint32_t next = 0;
  for (const Range& r : ranges_of(set)) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return spelled(out);
}

std::string single_property(const CharSet& set) {
  if (!set.extra.empty()) return "";
  for (auto [group, name] : kGroups)
    if (set.categories == group) return std::string("\\p{") + name + "}";
  for (int c = 0; c < unicode::kNumCategories; ++c)
    if (set.categories == 1u << c) return std::string("\\p{") + kNames[c] + "}";
  return "";
}

bool pcre2_agrees(std::string_view text) {
  static const unicode::CodePointSet differs(pcre2_view().differs);
  return differs.empty() || differs.find(text) == text.size();
}

}  // namespace nanovllm::regex_unicode
