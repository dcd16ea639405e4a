#include "daemon/config/config.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <memory>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"
#include "daemon/config/yaml_config.h"
#include "daemon/core/provider_table.h"
#include "daemon/core/provider_traits.h"
#include "daemon/receiver/proxy/proxy_routes.h"

namespace cachewatch {
namespace {

constexpr char kDescription[] =
    "cachewatchd: tells LLM agents why their prompt cache broke.\n"
    "Agents send a snapshot before each model request and the usage after "
    "it; every drop in cache reads is classified, stored in SQLite, exported "
    "on /metrics and streamed to watchers.\n"
    "Every flag can also be set as CACHEWATCH_<FLAG_NAME> in the environment "
    "or as <flag-name>: in the --config YAML file (flag > env > file).";

std::string EnvName(const std::string& flag) {
  std::string name = "CACHEWATCH_" + flag;
  for (char& c : name) c = c == '-' ? '_' : std::toupper(c);
  return name;
}

// A single-valued flag given twice takes its last value, as is usual for
// daemons whose command line is assembled in layers.
template <typename T>
CLI::Option* Add(CLI::App& app, const std::string& flag, T& field,
                 const std::string& help) {
  CLI::Option* option = app.add_option("--" + flag, field, help)
                            ->capture_default_str()
                            ->envname(EnvName(flag));
  if constexpr (!std::is_same_v<T, std::vector<std::string>>) {
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  return option;
}

// A flag in whole seconds for a duration kept in microseconds.
CLI::Option* AddSeconds(CLI::App& app, const std::string& flag, int64_t& micros,
                        const std::string& help) {
  return app
      .add_option_function<int64_t>(
          "--" + flag,
          [&micros](const int64_t& seconds) { micros = seconds * 1000000; },
          help)
      ->default_str(std::to_string(micros / 1000000))
      ->envname(EnvName(flag))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// "model=input,write5m,write1h,read" (USD per million tokens).
void ParsePrice(const std::string& text, ClassifierOptions& options) {
  const size_t equals = text.rfind('=');
  std::vector<double> values;
  if (equals != std::string::npos && equals > 0) {
    std::stringstream numbers(text.substr(equals + 1));
    for (std::string number; std::getline(numbers, number, ',');) {
      try {
        size_t used = 0;
        values.push_back(std::stod(number, &used));
        if (used != number.size() || values.back() < 0) values.clear();
      } catch (const std::exception&) {
        values.clear();
      }
      if (values.empty()) break;
    }
  }
  if (values.size() != 4) {
    throw CLI::ValidationError(
        "--price", "'" + text +
                       "': expected MODEL=INPUT,WRITE_5M,WRITE_1H,READ "
                       "(USD per million tokens, >= 0)");
  }
  options.prices[text.substr(0, equals)] = {values[0], values[1], values[2],
                                            values[3]};
}

// "provider=seconds".
void ParseTtl(const std::string& text, ClassifierOptions& options) {
  const size_t equals = text.find('=');
  const std::string provider = text.substr(0, equals);
  for (const ProviderRow& row : ProviderRows()) {
    if (row.name != provider) continue;
    try {
      const int seconds = std::stoi(text.substr(equals + 1));
      if (seconds > 0) {
        options.default_ttl_seconds[row.provider] = seconds;
        return;
      }
    } catch (const std::exception&) {
    }
  }
  std::vector<std::string> names;
  for (const ProviderRow& row : ProviderRows()) names.emplace_back(row.name);
  throw CLI::ValidationError(
      "--ttl", "'" + text +
                   "': expected PROVIDER=SECONDS with PROVIDER one of " +
                   absl::StrJoin(names, ", "));
}

// The flags an empty value leaves unset: an empty address disables its
// endpoint, an empty file or URL is none. Any other flag given as `--flag=`
// is an error naming it.
constexpr std::string_view kMayBeEmpty[] = {
    "config",          "metrics-listen", "store",
    "tls-cert",        "tls-key",        "tls-client-ca",
    "auth-token-file", "proxy-listen",   "proxy-upstream-ca"};

// An existing file, or empty for none.
CLI::Validator ExistingFileOrNone() {
  return CLI::Validator(
      [](std::string& path) {
        return path.empty() ? std::string() : CLI::ExistingFile(path);
      },
      "FILE");
}

// `args` with each `--flag=` written `--flag ""`: CLI11 reads an empty
// `--flag=` as a bare `--flag` and would take the next argument as its
// value. Throws CLI::ValidationError for a flag of `app` that must not be
// empty.
std::vector<std::string> WithEmptyValues(const CLI::App& app, int argc,
                                         char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 4 || !arg.starts_with("--") || !arg.ends_with("=") ||
        arg.find('=') != arg.size() - 1) {
      continue;
    }
    const std::string_view name =
        std::string_view(arg).substr(2, arg.size() - 3);
    if (app.get_option_no_throw(std::string(arg, 0, arg.size() - 1)) ==
        nullptr) {
      continue;  // CLI11 names it as an unknown argument.
    }
    if (std::find(std::begin(kMayBeEmpty), std::end(kMayBeEmpty), name) ==
        std::end(kMayBeEmpty)) {
      throw CLI::ValidationError(std::string("--").append(name),
                                 "needs a value, got an empty one");
    }
    args[i].pop_back();
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, "");
    ++i;
  }
  return args;
}

}  // namespace

std::variant<Config, ConfigExit> ParseConfig(int argc, char** argv,
                                             const std::string& version) {
  Config config;
  CLI::App app(kDescription, "cachewatchd");
  app.config_formatter(std::make_shared<YamlConfig>());
  app.set_config("--config", "", "YAML config file; keys are flag names")
      ->envname("CACHEWATCH_CONFIG");
  app.set_version_flag("--version", version);

  Add(app, "listen", config.listen, "gRPC address to serve cachewatch.v1 on");
  Add(app, "metrics-listen", config.metrics_listen,
      "Address of the Prometheus /metrics endpoint; empty disables it");
  Add(app, "db-path", config.store.path, "SQLite database file");
  Add(app, "store", config.store_url,
      "PostgreSQL URL (postgresql://user@host:5432/db) of a store shared by "
      "several daemons, instead of SQLite at --db-path (docs/FLEET.md)");
  Add(app, "store-timeout-ms", config.store_timeout_ms,
      "PostgreSQL store: a statement running longer is canceled by the "
      "server and its records refused with UNAVAILABLE (clients retry); a "
      "server silent for this long plus 1 s counts as unreachable")
      ->check(CLI::PositiveNumber);
  Add(app, "retention-hours", config.retention_hours,
      "Delete turns and breaks older than this; 0 keeps everything")
      ->check(CLI::NonNegativeNumber);
  Add(app, "min-missed-tokens", config.classifier.min_missed_tokens,
      "A break misses at least this many cached tokens")
      ->check(CLI::NonNegativeNumber);
  Add(app, "min-missed-ratio", config.classifier.min_missed_ratio,
      "... and at least this share of the expected reuse")
      ->check(CLI::Range(0.0, 1.0));
  std::vector<std::string> ttls;
  Add(app, "ttl", ttls,
      "Cache TTL assumed for a provider, PROVIDER=SECONDS (repeatable); "
      "defaults: 300 for every provider");
  std::vector<std::string> prices;
  Add(app, "price", prices,
      "Price of a model, MODEL=INPUT,WRITE_5M,WRITE_1H,READ in USD per "
      "million tokens (repeatable); breaks then carry their extra cost");
  Add(app, "max-lanes", config.tracker.max_lanes,
      "Most lanes held in memory; the least recently used is forgotten")
      ->check(CLI::PositiveNumber);
  AddSeconds(app, "pending-timeout-seconds", config.tracker.pending_timeout_us,
             "Give up a snapshot whose usage has not arrived after this long")
      ->check(CLI::PositiveNumber);
  AddSeconds(app, "usage-grace-seconds", config.tracker.usage_grace_us,
             "Let a usage that overtook its snapshot wait this long for it "
             "before its turn is classified without one")
      ->check(CLI::NonNegativeNumber);
  AddSeconds(app, "idle-lane-seconds", config.tracker.idle_lane_timeout_us,
             "Forget a lane without records for this long")
      ->check(CLI::PositiveNumber);
  Add(app, "max-tools", config.limits.max_tools,
      "Most tools a snapshot may list (more: INVALID_ARGUMENT)")
      ->check(CLI::PositiveNumber);
  Add(app, "max-message-bytes", config.max_message_bytes,
      "Largest gRPC message accepted (larger: RESOURCE_EXHAUSTED)")
      ->check(CLI::PositiveNumber);
  int64_t group_commit_us = config.store.max_batch_delay.count();
  Add(app, "group-commit-us", group_commit_us,
      "Extra wait for more records before a commit, in microseconds; 0 "
      "commits at once when no commit is in flight (records arriving during "
      "a commit join the next one)")
      ->check(CLI::NonNegativeNumber);
  Add(app, "max-batch-records", config.store.max_batch_records,
      "Most records committed in one transaction")
      ->check(CLI::PositiveNumber);
  Add(app, "max-queued-records", config.store.max_queued_records,
      "Records waiting for the store before ingest answers "
      "RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber);
  int64_t max_db_mb = 0;
  Add(app, "max-db-mb", max_db_mb,
      "Largest database size in MiB; beyond it records are refused with "
      "UNAVAILABLE until rows are deleted (retention); 0: no limit")
      ->check(CLI::NonNegativeNumber);
  Add(app, "synchronous-full", config.store.synchronous_full,
      "SQLite synchronous=FULL: acknowledged records also survive power "
      "loss (slower); the default NORMAL survives a daemon crash");
  Add(app, "max-label-values", config.max_label_values,
      "Distinct values per metric label; the rest are reported as 'other'")
      ->check(CLI::PositiveNumber);
  Add(app, "max-metric-series", config.max_metric_series,
      "Label sets per kind of metric series; later combinations are folded "
      "into one all-'other' set")
      ->check(CLI::PositiveNumber);
  Add(app, "watch-buffer", config.watch_buffer,
      "Breaks buffered per live watcher before it is cut off")
      ->check(CLI::PositiveNumber);
  Add(app, "tracker-shards", config.tracker_shards,
      "Independent lane tracker shards (lock striping)")
      ->check(CLI::Range(1, 1024));
  Add(app, "shutdown-grace-seconds", config.shutdown_grace_seconds,
      "On SIGTERM, how long Record streams and proxy requests in "
      "flight get to finish")
      ->check(CLI::NonNegativeNumber);
  Add(app, "tls-cert", config.tls_cert,
      "PEM certificate chain for the gRPC port; with --tls-key enables TLS")
      ->check(ExistingFileOrNone());
  Add(app, "tls-key", config.tls_key, "PEM private key for --tls-cert")
      ->check(ExistingFileOrNone());
  Add(app, "tls-client-ca", config.tls_client_ca,
      "PEM CA bundle; clients must present a certificate it signed (mTLS)")
      ->check(ExistingFileOrNone());
  Add(app, "auth-token-file", config.auth_token_file,
      "File of accepted bearer tokens, one per line; calls without one get "
      "UNAUTHENTICATED")
      ->check(ExistingFileOrNone());
  Add(app, "rate-limit", config.rate_limit_per_client,
      "Records per second per client (token or peer address); beyond it "
      "RESOURCE_EXHAUSTED; 0 disables")
      ->check(CLI::NonNegativeNumber);
  Add(app, "proxy-listen", config.proxy.listen,
      "Address of the HTTP proxy in front of the provider APIs (e.g. "
      "127.0.0.1:8787); empty disables it (docs/PROXY.md)");
  Add(app, "proxy-upstream", config.proxy.upstreams,
      "Where the proxy forwards, ROUTE=URL (repeatable): anthropic=URL for "
      "requests with an anthropic-version header, openai=URL for the rest, "
      "/PREFIX=URL for paths under /PREFIX; defaults "
      "anthropic=https://api.anthropic.com, openai=https://api.openai.com");
  Add(app, "proxy-upstream-ca", config.proxy.upstream_ca,
      "PEM CA bundle trusted for https upstreams instead of the system "
      "store")
      ->check(ExistingFileOrNone());
  Add(app, "proxy-request-diagnostics", config.proxy.request_diagnostics,
      "Add the provider's cache diagnostics request (against the lane's "
      "previous response) to forwarded requests; changes the request body");
  Add(app, "proxy-threads", config.proxy.threads, "I/O threads of the proxy")
      ->check(CLI::Range(1, 64));
  Add(app, "proxy-observe-queue", config.proxy.observe_queue,
      "Forwarded exchanges waiting to be observed; beyond it they are "
      "forwarded but not observed (counted)")
      ->check(CLI::PositiveNumber);
  Add(app, "proxy-max-request-bytes", config.proxy.max_request_bytes,
      "Largest request body the proxy forwards (larger: 413)")
      ->check(CLI::PositiveNumber);
  Add(app, "proxy-max-observed-bytes", config.proxy.max_observed_bytes,
      "Response bytes kept per exchange for observation; a longer response "
      "is forwarded whole but observed without its usage (counted)")
      ->check(CLI::PositiveNumber);
  Add(app, "proxy-upstream-timeout-seconds",
      config.proxy.upstream_timeout_seconds,
      "Longest silence from an upstream (or agent) within a response")
      ->check(CLI::PositiveNumber);
  Add(app, "log-level", config.log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));

  try {
    std::vector<std::string> args = WithEmptyValues(app, argc, argv);
    std::vector<char*> arg_pointers;
    for (std::string& arg : args) arg_pointers.push_back(arg.data());
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
    for (const std::string& price : prices) {
      ParsePrice(price, config.classifier);
    }
    for (const std::string& ttl : ttls) ParseTtl(ttl, config.classifier);
  } catch (const CLI::ParseError& error) {
    std::ostringstream out;
    std::ostringstream err;
    const int code = app.exit(error, out, err);
    return ConfigExit{code, out.str() + err.str()};
  }
  if (config.tls_cert.empty() != config.tls_key.empty() ||
      (!config.tls_client_ca.empty() && config.tls_cert.empty())) {
    return ConfigExit{2,
                      "--tls-cert and --tls-key go together, and "
                      "--tls-client-ca needs them\n"};
  }
  if (!config.store_url.empty() &&
      !config.store_url.starts_with("postgres://") &&
      !config.store_url.starts_with("postgresql://")) {
    return ConfigExit{2,
                      "--store: expected a postgres:// or postgresql:// URL "
                      "(SQLite: --db-path)\n"};
  }
  if (absl::StatusOr<ProxyRoutes> routes =
          ProxyRoutes::Make(config.proxy.upstreams);
      !routes.ok()) {
    return ConfigExit{2, std::string(routes.status().message()) + "\n"};
  }
  config.store.max_batch_delay = std::chrono::microseconds(group_commit_us);
  config.store.max_size_bytes = max_db_mb * 1024 * 1024;
  return config;
}

}  // namespace cachewatch
