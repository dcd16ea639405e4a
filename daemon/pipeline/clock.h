// The daemon's clock, injected so that tests can control expiries. Only
// unpaired-snapshot expiry, idle-lane eviction, retention and timestamp
// sanity checks use it; classification uses the client's timestamps.
//
// Implementations are thread-safe.
#ifndef CACHEWATCH_DAEMON_PIPELINE_CLOCK_H_
#define CACHEWATCH_DAEMON_PIPELINE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace cachewatch {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch.
  virtual int64_t NowMicros() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_PIPELINE_CLOCK_H_
