// RunServer: wires the daemon's parts together (store, metrics, trackers,
// gRPC service with health and reflection, /metrics endpoint, maintenance),
// serves until SIGTERM or SIGINT, then drains: health turns NOT_SERVING,
// in-flight calls get the grace period, everything acknowledged is
// committed, and it returns 0. Returns non-zero when it cannot start.
//
// Call once, from main, before any other thread exists (it blocks SIGTERM
// and SIGINT in every thread it starts).
#ifndef CACHEWATCH_DAEMON_SERVER_SERVER_H_
#define CACHEWATCH_DAEMON_SERVER_SERVER_H_

#include <string>

#include "daemon/config/config.h"

namespace cachewatch {

int RunServer(const Config& config, const std::string& version);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_SERVER_SERVER_H_
