#include "nanovllm/utils/log.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "nanovllm/utils/error.h"

namespace nanovllm {

LogLevel parse_log_level(const std::string& name, const std::string& flag) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (n == "debug" || n == "trace") return LogLevel::Debug;
  if (n == "info") return LogLevel::Info;
  if (n == "warning" || n == "warn") return LogLevel::Warning;
  if (n == "error") return LogLevel::Error;
  if (n == "critical") return LogLevel::Critical;
  throw UserError(flag + " " + name + ": not a log level (debug, info, warning, error, critical)");
}

void Logger::log(LogLevel l, const std::string& msg) const {
  if (!enabled(l)) return;
  static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%m-%d %H:%M:%S", &tm);
  std::fprintf(stderr, "%s %s [nanovllm] %s\n", kNames[int(l)], when, msg.c_str());
  std::fflush(stderr);
}

}  // namespace nanovllm
