#include "did_you_mean.h"

#include <algorithm>
#include <cctype>

#include "nanovllm/utils/error.h"

namespace nanovllm::cli {

namespace {

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool is_number(const std::string& a) {
  return a.size() > 1 && a[0] == '-' && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.');
}

// "--name" -> "name" (any "=value" dropped); "-x..." -> "x"; else "".
bool known_flag(const CLI::App& app, const std::string& arg, std::string& shown) {
  if (arg.rfind("--", 0) == 0) {
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    shown = "--" + name;
    for (const CLI::Option* o : app.get_options())
      for (auto& l : o->get_lnames())
        if (l == name) return true;
    return false;
  }
  shown = arg.substr(0, 2);
  for (const CLI::Option* o : app.get_options())
    for (auto& s : o->get_snames())
      if (s == arg.substr(1, 1)) return true;
  return false;
}

std::vector<std::string> visible_long_flags(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options())
    if (!o->get_group().empty())
      for (auto& l : o->get_lnames()) names.push_back("--" + l);
  return names;
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

void check_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  const auto names = subcommand_names(app);
  for (auto& a : args) {
    if (a.empty() || a[0] == '-') continue;  // --help, --version
    if (std::find(names.begin(), names.end(), a) != names.end()) return;
    const std::string near = closest(a, names);
    throw UserError("unknown command '" + a + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                    "; commands: " + joined(names));
  }
}

std::string unknown_flag_message(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* scope = &app;
  for (auto& a : args) {
    if (a == "--") break;  // the rest is positional
    if (scope == &app && !a.empty() && a[0] != '-') {
      const CLI::App* sub = nullptr;
      for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
        if (s->get_name() == a) sub = s;
      if (sub) scope = sub;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || is_number(a)) continue;
    std::string shown;
    if (known_flag(*scope, a, shown)) continue;
    const std::string near = closest(shown, visible_long_flags(*scope));
    const std::string where = scope == &app ? "" : " for '" + scope->get_name() + "'";
    return "unknown flag " + shown + where + (near.empty() ? "" : " (did you mean " + near + "?)") + "; see --help";
  }
  return "";
}

}  // namespace nanovllm::cli
