// fleet_bench: the aggregate durable ingest of three daemons on one
// PostgreSQL against one daemon on the same server, in the same run, and
// what the fleet stores per million turns.
//
// A PostgreSQL 15 server is started for the run (tests/support/
// postgres_process.h; fsync off, synchronous_commit on). Each phase uses a
// fresh database and real cachewatchd processes (tests/support/
// daemon_process.h) fed on loopback by --clients client threads, each
// sending its own lane's turns (tests/support/turn_records.h: a snapshot,
// then its usage, unary calls, one turn at a time, as a reporter without
// batching does) for --seconds:
//   - one: one daemon, all clients;
//   - fleet: three daemons, the clients spread over them.
// Prints records/s of each (acknowledged OK), the ratio fleet / one, rows/s
// of turns, and the bytes of turns, prompt_cache_breaks and the tool lists
// (pg_total_relation_size, indexes included) per million turns stored. All
// processes share the machine's cores: the ratio says what a second and
// third daemon add on this machine, not on three.
//
// Usage: fleet_bench [--seconds=5] [--clients=12]
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/daemon_process.h"
#include "tests/support/postgres_process.h"
#include "tests/support/turn_records.h"

namespace cachewatch::bench {
namespace {

using testing::DaemonProcess;
using testing::PostgresProcess;
using testing::TurnSnapshot;
using testing::TurnUsage;

// Sends turns of lane `session` to `stub` until `stop`; counts the records
// acknowledged OK.
void Client(v1::CacheWatch::Stub& stub, const std::string& session,
            const std::atomic<bool>& stop, std::atomic<int64_t>& acked) {
  for (int turn = 0; !stop.load(); ++turn) {
    grpc::ClientContext snapshot_context;
    v1::RecordSnapshotRequest snapshot;
    *snapshot.mutable_snapshot() = TurnSnapshot("bench", session, turn);
    v1::RecordSnapshotResponse snapshot_response;
    if (stub.RecordSnapshot(&snapshot_context, snapshot, &snapshot_response)
            .ok()) {
      ++acked;
    }
    grpc::ClientContext usage_context;
    v1::RecordUsageRequest usage;
    *usage.mutable_usage() = TurnUsage("bench", session, turn);
    v1::RecordUsageResponse usage_response;
    if (stub.RecordUsage(&usage_context, usage, &usage_response).ok()) ++acked;
  }
}

struct Phase {
  double records_per_s = 0;
  int64_t turns = 0;
  int64_t bytes = 0;
};

int64_t QueryInt(PostgresProcess& server, const std::string& database,
                 const std::string& sql) {
  return std::strtoll(server.Psql(database, sql).c_str(), nullptr, 10);
}

// Runs `daemons` daemons on database `database` with `clients_count`
// clients spread over them for `seconds`.
bool RunPhase(PostgresProcess& server, const std::string& database, int daemons,
              int clients_count, int seconds, Phase& phase) {
  if (!server.CreateDatabase(database)) return false;
  TempDir dir;
  std::vector<std::unique_ptr<DaemonProcess>> processes;
  for (int i = 0; i < daemons; ++i) {
    auto process = std::make_unique<DaemonProcess>();
    if (!process->Start(dir.File("unused-" + std::to_string(i) + ".db"),
                        {"--store=" + server.Url(database)})) {
      return false;
    }
    processes.push_back(std::move(process));
  }
  std::vector<std::unique_ptr<v1::CacheWatch::Stub>> stubs;
  for (auto& process : processes) stubs.push_back(process->NewStub());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0};
  std::vector<std::thread> clients;
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < clients_count; ++c) {
    clients.emplace_back(Client, std::ref(*stubs[c % daemons]),
                         database + "-" + std::to_string(c), std::cref(stop),
                         std::ref(acked));
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (std::thread& client : clients) client.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (auto& process : processes) process->Stop();
  phase.records_per_s = static_cast<double>(acked.load()) / elapsed;
  phase.turns = QueryInt(server, database, "SELECT count(*) FROM turns");
  phase.bytes =
      QueryInt(server, database,
               "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
               "JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent IN "
               "('turns'::regclass, 'prompt_cache_breaks'::regclass)") +
      QueryInt(server, database,
               "SELECT pg_total_relation_size('tool_lists') + "
               "pg_total_relation_size('tool_list_entries')");
  return true;
}

int Main(int argc, char** argv) {
  int seconds = 5;
  int clients = 12;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      seconds = std::atoi(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--clients=", 10) == 0) {
      clients = std::atoi(argv[i] + 10);
    } else {
      std::fprintf(stderr, "usage: fleet_bench [--seconds=N] [--clients=N]\n");
      return 2;
    }
  }
  if (!PostgresProcess::Available()) {
    std::printf("fleet_bench: SKIPPED (%s)\n",
                PostgresProcess::SkipReason().c_str());
    return 0;
  }
  std::unique_ptr<PostgresProcess> server = PostgresProcess::Start();
  if (server == nullptr) {
    std::fprintf(stderr, "fleet_bench: PostgreSQL failed to start\n");
    return 1;
  }
  Phase one, fleet;
  if (!RunPhase(*server, "one", 1, clients, seconds, one) ||
      !RunPhase(*server, "fleet", 3, clients, seconds, fleet)) {
    std::fprintf(stderr, "fleet_bench: a daemon failed to start\n");
    return 1;
  }
  std::printf(
      "fleet_bench: %d clients, %d s each: one daemon %.0f records/s, three "
      "daemons %.0f records/s; ratio %.2f; %.0f turns rows/s (fleet); "
      "%.0f MB per million turns stored (%lld turns)\n",
      clients, seconds, one.records_per_s, fleet.records_per_s,
      fleet.records_per_s / one.records_per_s, fleet.records_per_s / 2,
      fleet.turns > 0 ? static_cast<double>(fleet.bytes) /
                            static_cast<double>(fleet.turns) * 1e6 / 1e6
                      : 0.0,
      static_cast<long long>(fleet.turns));
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
