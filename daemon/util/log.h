// Structured logs: one JSON object per line on stderr, e.g.
//   {"ts":"2026-11-30T07:00:00.123Z","level":"info","msg":"listening",
//    "grpc":"127.0.0.1:50051"}
//
// Thread-safe: lines from different threads never interleave.
#ifndef CACHEWATCH_DAEMON_UTIL_LOG_H_
#define CACHEWATCH_DAEMON_UTIL_LOG_H_

#include <nlohmann/json.hpp>
#include <string>

namespace cachewatch {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
// "debug", "info", "warn", "error"; anything else is kInfo.
LogLevel ParseLogLevel(const std::string& name);

void Log(LogLevel level, const std::string& message,
         nlohmann::json fields = nlohmann::json::object());

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_LOG_H_
