// nanovllm settings [--markdown]: the engine settings table (config/settings.h), as the README's
// Markdown table (tests/unit/config checks that the README holds this output) or one block per setting.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/config/settings.h"

namespace nanovllm::cli {

void add_settings(CLI::App& app) {
  auto* cmd = app.add_subcommand("settings", "list the engine settings: CLI flags, Python keywords, defaults");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "the README's table (Markdown)");
  cmd->callback([markdown] {
    if (*markdown) {
      std::fputs(settings_markdown().c_str(), stdout);
      return;
    }
    for (const Setting& s : engine_settings()) {
      std::string spellings;
      for (const std::string& f : s.flags) spellings += (spellings.empty() ? "" : ", ") + f;
      if (!s.off_flag.empty()) spellings += ", " + s.off_flag;
      std::string keywords;
      for (const std::string& k : s.keywords) keywords += (keywords.empty() ? "" : ", ") + k;
      std::printf("%s\n  CLI: %s\n  Python: %s\n  %s\n", s.name.c_str(), spellings.empty() ? "-" : spellings.c_str(),
                  keywords.empty() ? "-" : keywords.c_str(), setting_help(s).c_str());
    }
  });
}

}  // namespace nanovllm::cli
