#include "daemon/util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace cachewatch {
namespace {

std::atomic<LogLevel> min_level{LogLevel::kInfo};

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string Now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const int millis =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                           now.time_since_epoch())
                           .count() %
                       1000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                utc.tm_min, utc.tm_sec, millis);
  return text;
}

}  // namespace

void SetLogLevel(LogLevel level) { min_level = level; }

LogLevel ParseLogLevel(const std::string& name) {
  for (LogLevel level :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (name == Name(level)) return level;
  }
  return LogLevel::kInfo;
}

void Log(LogLevel level, const std::string& message, nlohmann::json fields) {
  if (level < min_level) return;
  nlohmann::json line = {
      {"ts", Now()}, {"level", Name(level)}, {"msg", message}};
  for (auto& [key, value] : fields.items()) line[key] = std::move(value);
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
      "\n";
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace cachewatch
