// "did you mean": the closest known name to a misspelt flag or subcommand (edit distance), and the
// checks that turn an unknown flag or command on the command line into one clear line.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace nanovllm::cli {

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest to `word`, or "" when none is near enough to be a plausible typo
// (distance at most a third of the word's length, and at least 2 allowed).
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

// Before parsing: throws UserError when the first argument names no subcommand of `app`
// ("unknown command 'serv' (did you mean 'serve'?); commands: ...").
void check_subcommand(const CLI::App& app, const std::vector<std::string>& args);
// After a failed parse: the first argument that looks like a flag and is no option of the
// subcommand it follows, as "unknown flag --dtyp for 'serve' (did you mean --dtype?)"; "" if none.
std::string unknown_flag_message(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace nanovllm::cli
