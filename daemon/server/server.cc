#include "daemon/server/server.h"

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "daemon/exporter/prometheus/exposer.h"
#include "daemon/exporter/prometheus/turn_metrics.h"
#include "daemon/exporter/turn_exporter.h"
#include "daemon/exporter/watch/break_hub.h"
#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/grpc/cachewatch_service.h"
#include "daemon/receiver/grpc/client_gate.h"
#include "daemon/receiver/proxy/proxy_receiver.h"
#include "daemon/server/health_service.h"
#include "daemon/store/postgres/postgres_store.h"
#include "daemon/store/sqlite/sqlite_store.h"
#include "daemon/telemetry/telemetry.h"
#include "daemon/util/file.h"
#include "daemon/util/file_lock.h"
#include "daemon/util/log.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

PipelineOptions PipelineOptionsFrom(const Config& config) {
  PipelineOptions options;
  options.tracker = config.tracker;
  options.classifier = config.classifier;
  options.limits = config.limits;
  options.shards = config.tracker_shards;
  options.retention_us = config.retention_hours * 3600 * 1'000'000;
  options.max_records_per_write = config.store.max_batch_records;
  return options;
}

constexpr char kServiceName[] = "cachewatch.v1.CacheWatch";

// At shutdown, once the Record streams have ended, the longest the other
// calls in flight may take.
constexpr std::chrono::seconds kFinalCallsGrace(1);
// After the signal, new calls are refused by the service (UNAVAILABLE) for
// at least this long before the gRPC server stops.
constexpr std::chrono::seconds kRefusalWindow(1);
// Idle threads gRPC keeps for unary calls (see RunServer).
constexpr int kMaxIdleUnaryThreads = 16;

// protobuf logs every string it refuses as invalid UTF-8, on stderr and not
// as JSON; that refusal is answered to the client (record_decoder.h), so
// its lines go to the debug level, in the daemon's format.
void LogFromProtobuf(google::protobuf::LogLevel level, const char* file,
                     int line, const std::string& message) {
  Log(level >= google::protobuf::LOGLEVEL_FATAL ? LogLevel::kError
                                                : LogLevel::kDebug,
      "protobuf", {{"file", file}, {"line", line}, {"detail", message}});
}

// Runs `pipeline.Maintain()` every second until stopped, updates the watch
// subscriber gauge, and reports the store's state as the health of the
// cachewatch service: NOT_SERVING while it cannot write — its last commit
// failed, or its health probe (RecordStore::ProbeWritable, at start and
// every second while unhealthy) fails, as on a database started full (the
// server itself, "", stays SERVING: queries still work and the daemon
// recovers by itself).
class MaintenanceLoop {
 public:
  // `healthy`: the state reported now.
  MaintenanceLoop(IngestPipeline* pipeline, RecordStore* store, BreakHub* hub,
                  Telemetry* telemetry, HealthService* health, bool healthy)
      : thread_([this, pipeline, store, hub, telemetry, health,
                 healthy]() mutable {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_cv_.wait_for(lock, std::chrono::seconds(1),
                                    [this] { return stopping_; })) {
            lock.unlock();
            pipeline->Maintain();
            telemetry->SetWatchSubscribers(hub->subscriber_count());
            const absl::Status probed =
                healthy ? absl::OkStatus() : store->ProbeWritable();
            const StoreStats stats = store->stats();
            const bool now_healthy = probed.ok() && !stats.last_commit_failed;
            if (now_healthy != healthy) {
              healthy = now_healthy;
              health->SetServingStatus(kServiceName, healthy);
              telemetry->SetStoreHealthy(healthy);
              if (healthy) {
                Log(LogLevel::kInfo, "store writable again");
              } else {
                Log(LogLevel::kWarn, "store cannot write",
                    {{"error", probed.ok() ? stats.last_error
                                           : std::string(probed.message())}});
              }
            }
            lock.lock();
          }
        }) {}
  ~MaintenanceLoop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // Guarded by mutex_.
  std::thread thread_;
};

// The server's credentials; an error naming the TLS file that cannot be
// read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const Config& config) {
  if (config.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      config.tls_client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  CACHEWATCH_ASSIGN_OR_RETURN(std::string key,
                              ReadFileToString(config.tls_key));
  CACHEWATCH_ASSIGN_OR_RETURN(std::string cert,
                              ReadFileToString(config.tls_cert));
  options.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
  if (!config.tls_client_ca.empty()) {
    CACHEWATCH_ASSIGN_OR_RETURN(options.pem_root_certs,
                                ReadFileToString(config.tls_client_ca));
  }
  return grpc::SslServerCredentials(options);
}

// The store as logged: the SQLite path, or the PostgreSQL URL without its
// user and password.
std::string StoreName(const Config& config) {
  if (config.store_url.empty()) return config.store.path;
  const size_t scheme = config.store_url.find("://") + 3;
  const size_t at = config.store_url.find('@', scheme);
  return at == std::string::npos ? config.store_url
                                 : config.store_url.substr(0, scheme) +
                                       config.store_url.substr(at + 1);
}

}  // namespace

int RunServer(const Config& config, const std::string& version) {
  SetLogLevel(ParseLogLevel(config.log_level));
  google::protobuf::SetLogHandler(&LogFromProtobuf);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentials(config);
  if (!credentials.ok()) {
    Log(LogLevel::kError, "cannot read the TLS files",
        {{"error", std::string(credentials.status().message())}});
    return 1;
  }

  // One registry for /metrics: the turn metrics and the daemon's telemetry.
  auto registry = std::make_shared<prometheus::Registry>();
  Telemetry telemetry(registry, version);
  MetricsOptions metrics_options;
  metrics_options.max_label_values = config.max_label_values;
  metrics_options.max_series = config.max_metric_series;
  TurnMetrics turn_metrics(metrics_options, registry);

  // The store: PostgreSQL when --store names a server, else SQLite at
  // --db-path. `store` owns it; both point into it. A SQLite database is
  // one daemon's: its lanes live in that daemon's memory, and a second
  // writer would judge turns against states it never saw. `database_lock`
  // (<db-path>.lock) keeps a second daemon out until this one's store has
  // closed (declared first, destroyed last).
  std::optional<FileLock> database_lock;
  std::unique_ptr<RecordStore> store;
  BreakQueries* queries = nullptr;
  const std::string store_name = StoreName(config);
  if (IsPostgresUrl(config.store_url)) {
    PostgresStoreOptions options;
    options.url = config.store_url;
    options.timeout = std::chrono::milliseconds(config.store_timeout_ms);
    options.max_batch_delay = config.store.max_batch_delay;
    options.max_batch_records = config.store.max_batch_records;
    options.max_queued_records = config.store.max_queued_records;
    absl::StatusOr<std::unique_ptr<PostgresStore>> opened =
        PostgresStore::Open(options);
    if (!opened.ok()) {
      Log(LogLevel::kError, "cannot open the store",
          {{"store", store_name},
           {"error", std::string(opened.status().message())}});
      return 1;
    }
    queries = opened->get();
    store = *std::move(opened);
  } else {
    const std::string lock_path = config.store.path + ".lock";
    absl::StatusOr<FileLock> locked = FileLock::Acquire(lock_path);
    if (!locked.ok()) {
      nlohmann::json fields = {
          {"path", config.store.path},
          {"error", std::string(locked.status().message())}};
      if (locked.status().code() == absl::StatusCode::kFailedPrecondition) {
        fields["hint"] =
            "one daemon writes a SQLite database: stop the other, give this "
            "one another --db-path, or run several on PostgreSQL "
            "(--store=postgresql://..., docs/FLEET.md)";
        Log(LogLevel::kError, "the database is in use by another cachewatchd",
            std::move(fields));
      } else {
        Log(LogLevel::kError, "cannot lock the database", std::move(fields));
      }
      return 1;
    }
    database_lock.emplace(*std::move(locked));
    absl::StatusOr<std::unique_ptr<SqliteStore>> opened =
        SqliteStore::Open(config.store);
    if (!opened.ok()) {
      Log(LogLevel::kError, "cannot open the store",
          {{"path", config.store.path},
           {"error", std::string(opened.status().message())}});
      return 1;
    }
    queries = opened->get();
    store = *std::move(opened);
  }

  std::unique_ptr<prometheus::Exposer> exposer;
  std::string metrics_address;
  if (!config.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> started =
        StartExposer(config.metrics_listen, registry);
    if (!started.ok()) {
      Log(LogLevel::kError, "cannot serve /metrics",
          {{"address", config.metrics_listen},
           {"error", std::string(started.status().message())}});
      return 1;
    }
    exposer = *std::move(started);
    const std::string metrics_host =
        config.metrics_listen.substr(0, config.metrics_listen.rfind(':'));
    metrics_address = metrics_host + ":" +
                      std::to_string(exposer->GetListeningPorts().front());
  }

  ClientGateOptions gate_options;
  gate_options.records_per_second = config.rate_limit_per_client;
  if (!config.auth_token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens =
        ClientGate::ReadTokenFile(config.auth_token_file);
    if (!tokens.ok()) {
      Log(LogLevel::kError, "cannot read the token file",
          {{"error", std::string(tokens.status().message())}});
      return 1;
    }
    gate_options.tokens = *std::move(tokens);
  }
  ClientGate gate(std::move(gate_options));

  // The exporters, each non-blocking (turn_exporter.h), in one fan-out.
  BreakHub hub(config.watch_buffer);
  ExportFanOut exporters({&turn_metrics, &hub});
  SystemClock clock;
  IngestPipeline pipeline(PipelineOptionsFrom(config), store.get(), &exporters,
                          &telemetry, &clock);
  absl::StatusOr<std::vector<RestoredLane>> restored = pipeline.RestoreLanes();
  if (!restored.ok()) {
    Log(LogLevel::kWarn, "could not reload recent lanes",
        {{"error", std::string(restored.status().message())}});
    restored = std::vector<RestoredLane>();
  }
  CacheWatchService service(&pipeline, queries, &hub, &gate, &clock);

  // The HTTP proxy receiver (docs/PROXY.md), feeding the same pipeline.
  std::unique_ptr<ProxyReceiver> proxy;
  if (!config.proxy.listen.empty()) {
    absl::StatusOr<std::unique_ptr<ProxyReceiver>> started =
        ProxyReceiver::Start(config.proxy, &pipeline, *registry, *restored);
    if (!started.ok()) {
      Log(LogLevel::kError, "cannot serve the HTTP proxy",
          {{"address", config.proxy.listen},
           {"error", std::string(started.status().message())}});
      return 1;
    }
    proxy = *std::move(started);
  }
  const size_t restored_lanes = restored->size();
  *restored = {};  // Read by the receivers as they started; not needed now.

  // Our own health service, not gRPC's default one (health_service.h).
  HealthService health;
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(config.listen, *credentials, &grpc_port);
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  // The query calls (and WatchBreaks, health checks) run on gRPC's
  // synchronous thread pool, which by default keeps at most 2 idle threads;
  // the ingest calls are on the asynchronous API (daemon/receiver/grpc) and
  // hold no thread while their commit is pending. The bound was raised when
  // unary ingest ran on the pool, each call holding a thread through its
  // commit (~370 threads a second started and ended under 4 unary clients);
  // with no call waiting there it starts no more threads. Idle threads kept:
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxIdleUnaryThreads);
  builder.RegisterService(&service);
  builder.RegisterService(&health);
  service.AddRecordQueue(&builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    Log(LogLevel::kError, "cannot serve gRPC", {{"address", config.listen}});
    return 1;
  }
  service.StartRecordStreams();
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));
  Log(LogLevel::kInfo, "listening",
      {{"grpc", host + ":" + std::to_string(grpc_port)},
       {"metrics", metrics_address},
       {"proxy", proxy ? proxy->address() : ""},
       {"db", store_name},
       {"tls", !config.tls_cert.empty()},
       {"mtls", !config.tls_client_ca.empty()},
       {"auth", gate.authenticates()},
       {"version", version},
       {"restored_lanes", restored_lanes}});

  int signal_number = 0;
  {
    const absl::Status writable = store->ProbeWritable();
    if (!writable.ok()) {
      Log(LogLevel::kWarn, "store cannot write",
          {{"error", std::string(writable.message())}});
    }
    telemetry.SetStoreHealthy(writable.ok());
    health.SetServingStatus(kServiceName, writable.ok());
    MaintenanceLoop maintenance(&pipeline, store.get(), &hub, &telemetry,
                                &health, writable.ok());
    sigwait(&signals, &signal_number);
    // The shutdown sequence (docs/OPERATIONS.md): health NOT_SERVING first,
    // while the server still answers health checks; then new ingest calls
    // and streams are refused, open Record streams acknowledge everything
    // they read and end with UNAVAILABLE, the proxy stops accepting and lets
    // its requests in flight finish; then the servers stop, cancelling what
    // is left when the grace period is over.
    const auto grace = std::chrono::seconds(config.shutdown_grace_seconds);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    Log(LogLevel::kInfo, "shutting down", {{"signal", signal_number}});
    health.Shutdown();  // Health Watch calls end now.
    const auto refusing_since = std::chrono::steady_clock::now();
    service.BeginShutdown();
    if (proxy) proxy->BeginShutdown();
    hub.Close();
    if (!service.WaitForRecordStreams(deadline)) {
      Log(LogLevel::kWarn, "record streams still open after the grace period");
    }
    // Streams end within milliseconds of the signal; new calls still get the
    // service's UNAVAILABLE, not the CANCELLED of a gRPC server shutting
    // down, for kRefusalWindow after it.
    std::this_thread::sleep_until(
        std::min(deadline, refusing_since + kRefusalWindow));
    // Ingest calls admitted before BeginShutdown finish within a commit; the
    // rest (queries, which gRPC's Shutdown can otherwise wait on for the
    // whole grace period) get at most kFinalCallsGrace.
    const auto remaining =
        std::max(deadline - std::chrono::steady_clock::now(),
                 std::chrono::steady_clock::duration::zero());
    server->Shutdown(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::min<std::chrono::steady_clock::duration>(remaining,
                                                          kFinalCallsGrace)));
    server->Wait();
    service.StopRecordQueue();
    if (proxy && !proxy->WaitForRequests(deadline)) {
      Log(LogLevel::kWarn,
          "proxy requests still in flight after the grace period: cut off");
    }
  }
  proxy.reset();  // Cuts what is left; observes and commits what is queued.
  store.reset();  // Drains the queue and commits.
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace cachewatch
