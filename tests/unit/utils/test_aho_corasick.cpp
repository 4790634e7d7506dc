// The Aho-Corasick automaton (utils/aho_corasick.h) against brute force: after every byte of a
// random text over random pattern sets, its depth (the longest suffix that is a prefix of a
// pattern), its longest match ending there, and the first listed pattern a text starts with.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "nanovllm/utils/aho_corasick.h"

using nanovllm::AhoCorasick;

namespace {

bool ends_with(const std::string& t, const std::string& p) {
  return t.size() >= p.size() && t.compare(t.size() - p.size(), p.size(), p) == 0;
}

}  // namespace

TEST(AhoCorasick, StatesAgreeWithBruteForce) {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 3000; ++iter) {
    const int alphabet = 2 + int(rng() % 3);
    std::vector<std::string> pats;
    for (int k = 1 + int(rng() % 10); k > 0; --k) {
      std::string p;
      for (int n = 1 + int(rng() % 5); n > 0; --n) p += char(0xfd + rng() % alphabet);  // bytes >= 0x80 too
      pats.push_back(p);
    }
    const AhoCorasick ac(pats);
    std::string text;
    AhoCorasick::State s = AhoCorasick::kStart;
    for (int n = int(rng() % 30); n > 0; --n) {
      text += char(0xfd + rng() % alphabet);
      s = ac.next(s, static_cast<unsigned char>(text.back()));
      size_t depth = 0, longest = 0;
      for (const auto& p : pats) {
        if (ends_with(text, p)) longest = std::max(longest, p.size());
        for (size_t k = std::min(p.size(), text.size()); k > depth; --k)
          if (text.compare(text.size() - k, k, p, 0, k) == 0) depth = k;
      }
      ASSERT_EQ(ac.depth(s), depth) << "iteration " << iter;
      ASSERT_EQ(ac.longest_match(s), longest) << "iteration " << iter;
    }
    int32_t first = -1;
    for (size_t i = 0; i < pats.size() && first < 0; ++i)
      if (text.compare(0, pats[i].size(), pats[i]) == 0 && text.size() >= pats[i].size()) first = int32_t(i);
    ASSERT_EQ(ac.first_listed_prefix(text), first) << "iteration " << iter;
  }
}

TEST(AhoCorasick, EmptyPatternSetMatchesNothing) {
  const AhoCorasick ac;
  AhoCorasick::State s = AhoCorasick::kStart;
  for (unsigned char c : std::string("anything")) s = ac.next(s, c);
  EXPECT_EQ(ac.depth(s), 0u);
  EXPECT_EQ(ac.longest_match(s), 0u);
  EXPECT_EQ(ac.first_listed_prefix("anything"), -1);
}

TEST(AhoCorasick, RefusesAnEmptyPattern) { EXPECT_THROW(AhoCorasick({"a", ""}), std::invalid_argument); }

TEST(AhoCorasick, SizeIsLinearInThePatterns) {
  std::vector<std::string> pats;
  size_t total = 0;
  for (int i = 0; i < 10000; ++i) {
    pats.push_back("stop-" + std::to_string(i * 7919) + "-string");
    total += pats.back().size();
  }
  const AhoCorasick ac(pats);
  EXPECT_LE(ac.num_states(), total + 1);
  EXPECT_LE(ac.memory_bytes(), 32 * total);  // about 25 bytes per state, 256 table entries aside
}
