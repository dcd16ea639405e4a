// The daemon's configuration: every setting has a flag, an environment
// variable (CACHEWATCH_ + the flag name in upper case with underscores) and
// a key in the YAML config file (--config). Precedence: flag, then
// environment, then file, then the default shown by --help.
//
// ParseConfig is not thread-safe (it is called once, from main).
#ifndef CACHEWATCH_DAEMON_CONFIG_CONFIG_H_
#define CACHEWATCH_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "daemon/core/classifier.h"
#include "daemon/core/lane_tracker.h"
#include "daemon/pipeline/validation.h"
#include "daemon/receiver/proxy/proxy_options.h"
#include "daemon/store/sqlite/sqlite_store.h"

namespace cachewatch {

struct Config {
  std::string listen = "127.0.0.1:50051";         // gRPC address.
  std::string metrics_listen = "127.0.0.1:9464";  // "" disables /metrics.
  StoreOptions store;                             // db-path etc.
  // A PostgreSQL URL (postgres:// or postgresql://): the store shared by a
  // fleet of daemons (docs/FLEET.md); empty: SQLite at store.path.
  std::string store_url;
  // The PostgreSQL store's statement timeout (PostgresStoreOptions::timeout),
  // in milliseconds.
  int64_t store_timeout_ms = 10000;
  ClassifierOptions classifier;             // thresholds, TTLs, prices
  TrackerOptions tracker;                   // lanes, timeouts
  ValidationLimits limits;                  // tools, names, times
  int max_message_bytes = 4 * 1024 * 1024;  // Larger: RESOURCE_EXHAUSTED.
  int64_t retention_hours = 24 * 30;        // 0 keeps everything.
  size_t max_label_values = 100;            // Per metric label.
  size_t max_metric_series = 500;           // Label sets per kind.
  size_t watch_buffer = 1024;               // Breaks per subscriber.
  int tracker_shards = 16;
  int shutdown_grace_seconds = 10;
  std::string log_level = "info";  // debug, info, warn, error
  // TLS for the gRPC port: PEM files; all empty serves plaintext. With a
  // client CA, clients must present a certificate it signed (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string auth_token_file;       // Bearer tokens, one per line.
  double rate_limit_per_client = 0;  // Records/s per client; 0: none.
  ProxyOptions proxy;                // --proxy-*; off unless proxy.listen.
};

// What ParseConfig decided: run with a config, or exit (after --help,
// --version or an error, with the text to print and the exit code).
struct ConfigExit {
  int exit_code;
  std::string message;
};

std::variant<Config, ConfigExit> ParseConfig(int argc, char** argv,
                                             const std::string& version);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CONFIG_CONFIG_H_
