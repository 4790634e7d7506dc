// The one-pass stop-string filter (output/stop_filter.h) against the filter it replaced
// (tests/naive_stop_filter.h: each stop string searched on its own) as the oracle: random stop sets
// (prefixes of each other, duplicates, multi-byte UTF-8) over random texts cut into random deltas
// must give the same shown text after every delta, the same held-back bytes, the same stop and the
// same matched string; plus the cases the semantics hinge on, spelt out.
#include <gtest/gtest.h>

#include <random>

#include "naive_stop_filter.h"
#include "nanovllm/output/stop_filter.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;
using nanovllm::output::StopFilter;
using nanovllm::test::NaiveStopFilter;

namespace {

// Pushes `deltas` through both filters (the last one final when `final`), comparing every step.
void expect_same(const std::vector<std::string>& stops, bool include, const std::vector<std::string>& deltas,
                 bool final, const std::string& what) {
  NaiveStopFilter naive(stops, include);
  StopFilter fast(StopStrings(stops), include);
  for (size_t i = 0; i < deltas.size(); ++i) {
    const bool last = final && i + 1 == deltas.size();
    const std::string want = naive.push(deltas[i], last);
    const std::string got = fast.push(deltas[i], last);
    ASSERT_EQ(got, want) << what << " delta " << i;
    ASSERT_EQ(fast.stopped(), naive.stopped()) << what << " delta " << i;
    ASSERT_EQ(fast.held(), naive.held()) << what << " delta " << i;
    ASSERT_EQ(fast.matched(), naive.matched()) << what << " delta " << i;
  }
}

std::string describe(const std::vector<std::string>& stops, const std::vector<std::string>& deltas, bool include) {
  std::string s = "stops [";
  for (auto& x : stops) s += "'" + x + "' ";
  s += "] deltas [";
  for (auto& x : deltas) s += "'" + x + "' ";
  return s + "] include " + std::to_string(include);
}

}  // namespace

TEST(StopFilter, EarliestStartWinsThenTheFirstListed) {
  // "bc" ends first but "abcd" starts earlier: the earlier start wins once both are in the text.
  StopFilter f(StopStrings{"bc", "abcd"}, false);
  EXPECT_EQ(f.push("xabcd", false), "x");
  EXPECT_EQ(f.matched(), "abcd");
  // Only "bc" complete so far: it ends the text (a longer one starting earlier is not waited for).
  StopFilter g(StopStrings{"bc", "abcd"}, true);
  EXPECT_EQ(g.push("xab", false), "x");
  EXPECT_EQ(g.push("c", false), "abc");
  EXPECT_EQ(g.matched(), "bc");
  // Two starting at the same place: the first listed, whichever is longer.
  StopFilter h(StopStrings{"abc", "ab"}, false);
  EXPECT_EQ(h.push("zzabcz", false), "zz");
  EXPECT_EQ(h.matched(), "abc");
  EXPECT_EQ(h.push("more", true), "");  // nothing after the stop
}

TEST(StopFilter, HoldsBackAPossibleStopStringUntilItIsKnown) {
  StopFilter f(StopStrings{"END", "\xe4\xbd\xa0\xe5\xa5\xbd"}, false);  // "END", "你好"
  EXPECT_EQ(f.push("The EN", false), "The ");
  EXPECT_EQ(f.held(), 2u);
  EXPECT_EQ(f.push("ding \xe4\xbd\xa0", false), "ENding ");  // not "END": shown; "你" may start "你好"
  EXPECT_EQ(f.push("\xe4\xbd\xa0", false), "\xe4\xbd\xa0");
  EXPECT_EQ(f.push("", true), "\xe4\xbd\xa0");  // the end: the held bytes come out
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, EmptyStopStringsAreRefused) {
  try {
    StopStrings s{"a", ""};
    FAIL() << "an empty stop string was accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param, "stop");
  }
}

TEST(StopFilter, MatchesTheNaiveFilterOnRandomStopSetsAndDeltas) {
  std::mt19937 rng(44);
  // Single bytes (dense matches) and multi-byte characters (UTF-8 boundaries).
  const std::vector<std::vector<std::string>> alphabets = {
      {"a", "b", "c"}, {"a", "\xc3\xa9", "\xe4\xbd\xa0", "\xf0\x9f\x99\x82", " "}, {"x", "y"}};
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  int stopped = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const auto& abc = alphabets[pick(alphabets.size())];
    auto word = [&](size_t max_chars) {
      std::string w;
      for (size_t k = 1 + pick(max_chars); k > 0; --k) w += abc[pick(abc.size())];
      return w;
    };
    std::vector<std::string> stops;
    for (size_t k = 1 + pick(8); k > 0; --k) {
      if (!stops.empty() && pick(5) == 0)
        stops.push_back(stops[pick(stops.size())]);  // a duplicate
      else if (!stops.empty() && pick(4) == 0)
        stops.push_back(stops[pick(stops.size())] + word(2));  // an extension of another
      else
        stops.push_back(word(pick(3) == 0 ? 8 : 4));
    }
    std::vector<std::string> chars;
    for (size_t k = pick(40); k > 0; --k) chars.push_back(abc[pick(abc.size())]);
    // Deltas of whole characters (the detokenizer's), or of raw bytes one time in four.
    std::vector<std::string> deltas;
    const bool bytes = pick(4) == 0;
    std::string text;
    for (auto& c : chars) text += c;
    for (size_t i = 0; i < (bytes ? text.size() : chars.size());) {
      const size_t n = pick(4);  // 0: an empty delta (a token with no text yet)
      std::string d;
      for (size_t k = 0; k < n && i < (bytes ? text.size() : chars.size()); ++k, ++i)
        d += bytes ? std::string(1, text[i]) : chars[i];
      deltas.push_back(d);
    }
    const bool include = pick(2) == 0, final = pick(3) != 0;
    expect_same(stops, include, deltas, final, describe(stops, deltas, include));
    if (::testing::Test::HasFatalFailure()) return;
    NaiveStopFilter n(stops, include);
    for (auto& d : deltas) n.push(d, false);
    stopped += n.stopped();
  }
  EXPECT_GT(stopped, 2000);  // the cases exercise stops, not only hold-backs
}

TEST(StopFilter, ManyLongStopStringsMatchTheNaiveFilter) {
  std::mt19937 rng(7);
  std::vector<std::string> stops;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    for (int k = 3 + int(rng() % 30); k > 0; --k) s += char('a' + rng() % 4);
    stops.push_back(s);
  }
  std::string text;
  for (int k = 0; k < 4000; ++k) text += char('a' + rng() % 5);  // 'e' breaks partial matches
  std::vector<std::string> deltas;
  for (size_t i = 0; i < text.size(); i += 3) deltas.push_back(text.substr(i, 3));
  expect_same(stops, false, deltas, true, "3000 stop strings");
}
