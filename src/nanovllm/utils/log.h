// Log lines in vLLM's shape ("INFO 11-25 22:30:00 [nanovllm] message") on stderr, filtered by a
// level. A Logger is a value handed to whoever logs (no global logger, no global level).
#pragma once
#include <string>

namespace nanovllm {

enum class LogLevel { Debug, Info, Warning, Error, Critical };

// "debug" | "info" | "warning" | "error" | "critical" (any case; uvicorn's "trace" = debug);
// throws UserError naming `flag` otherwise.
LogLevel parse_log_level(const std::string& name, const std::string& flag);

class Logger {
 public:
  Logger() = default;  // info and above
  explicit Logger(LogLevel min) : min_(min) {}
  bool enabled(LogLevel l) const { return l >= min_; }
  void log(LogLevel l, const std::string& msg) const;  // one line, flushed
  void info(const std::string& msg) const { log(LogLevel::Info, msg); }
  void warning(const std::string& msg) const { log(LogLevel::Warning, msg); }
  void debug(const std::string& msg) const { log(LogLevel::Debug, msg); }
  LogLevel level() const { return min_; }

 private:
  LogLevel min_ = LogLevel::Info;
};

}  // namespace nanovllm
