// pg_store_bench: turns/s of PostgresStore::Write against raw batched COPY
// into the same table of the same server, in the same run.
//
// A PostgreSQL 15 server is started for the run (tests/support/
// postgres_process.h; fsync off on both sides, synchronous_commit on):
//   - store: W writer threads (--writers, default 4) each call
//     PostgresStore::Write with batches of kTurnsPerWrite turns (records.h:
//     a 50-tool snapshot, a usage with raw JSON, an OK classification: three
//     records, one turns row per turn),
//     as stream handlers do; group commit joins them.
//   - raw: one connection, COPY of kRowsPerCopy turns rows per transaction
//     into the store's own (partitioned, indexed) turns table of a second
//     database: the fastest way in. The rows are the store's rows for the
//     same turns, column for column (received_at_us aside: the request time
//     here, the commit's clock in the store), tool_list_hash included: the
//     turns' tool lists and their entries are inserted before the clock, so
//     COPY pays the same foreign-key check (turns_tool_list_hash_fkey) as
//     the store's rows.
// The records are built before the clock starts. The two run R times
// (rounds), each round into a fresh pair of databases, raw first in odd
// rounds and the store first in even ones. Prints each round's rates and
// ratio, then the medians of the rounds' rates and ratios, and PASS/FAIL of
// the median ratio against the target (store >= 50 % of raw).
//
// Usage: pg_store_bench [--turns=N] [--writers=W] [--days=D] [--rounds=R]
//                       [--split]
//   N turns per writer thread (default 5000), W writer threads (default 4).
//   More writers make bigger group commits (up to the queue's
//   max_batch_records, 1000 records = 333 turns): how the ratio depends on
//   the batch size. D: partitions of the D days before yesterday created in
//   both databases first (empty), as a retention window of D days holds
//   them (default 0: the store's own, yesterday to two days ahead).
//   R: rounds (default 3). --split: each turn's snapshot in one Write and
//   its usage and classification in the writer's next, as unary clients'
//   records arrive, so that every turn is inserted and then found and
//   updated (by default all three share a Write and every turn is new:
//   the update path is never run). The raw side is the same either way.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/store_turns.h"
#include "daemon/store/columns.h"
#include "daemon/store/postgres/pg_binary_rows.h"
#include "daemon/store/postgres/pg_connection.h"
#include "daemon/store/postgres/pg_schema.h"
#include "daemon/store/postgres/pg_write_statements.h"
#include "daemon/store/postgres/postgres_store.h"
#include "tests/support/postgres_process.h"

namespace cachewatch::bench {
namespace {

constexpr int kDefaultWriters = 4;
constexpr int kTurnsPerWrite = 50;
constexpr int kRowsPerCopy = 1000;
constexpr double kTarget = 0.5;
constexpr int kDefaultRounds = 3;

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "pg_store_bench: %s\n", message.c_str());
  std::exit(1);
}

std::unique_ptr<PostgresStore> OpenStore(const std::string& url) {
  PostgresStoreOptions options;
  options.url = url;
  options.timeout = std::chrono::milliseconds(60000);
  absl::StatusOr<std::unique_ptr<PostgresStore>> store =
      PostgresStore::Open(options);
  if (!store.ok()) Die(store.status().ToString());
  return *std::move(store);
}

// Turns per second through PostgresStore::Write.
double RunStore(const std::string& url,
                const std::vector<std::vector<StoreTurn>>& turns,
                TurnSpread spread) {
  std::unique_ptr<PostgresStore> store = OpenStore(url);
  return TimeStoreWrites(*store, turns, kTurnsPerWrite, "pg_store_bench",
                         spread);
}

// The types of kCopyColumns, as PgBinaryRows takes them.
constexpr char kCopyTypes[] =
    "tttttt88"      // Key, provider, model, request and response times.
    "44tt8t448ytt"  // snapshot_received .. tool_list_hash.
    "t8888888t"     // breakpoints, the usage's tokens, raw_usage_json.
    "t888";         // verdict, expected_reuse_tokens, missed_tokens,
                    // received_at_us.

// Appends one turns row (columns as in kCopyColumns): the columns the store
// writes for the turn, the tool list's hash, the system sections', the
// breakpoints' JSON and the message chain as the store makes them
// (columns.h); received_at_us is the request time here, the commit's clock
// in the store.
void AddCopyRow(PgBinaryRows& rows, const StoreTurn& turn) {
  const v1::Snapshot& snapshot = *turn.snapshot;
  const v1::NormalizedUsage& usage = turn.usage.normalized();
  const int64_t request_us = snapshot.request_time().seconds() * 1'000'000 +
                             snapshot.request_time().nanos() / 1000;
  const int64_t response_us = turn.usage.response_time().seconds() * 1'000'000 +
                              turn.usage.response_time().nanos() / 1000;
  rows.Row()
      .Text(turn.lane.agent)
      .Text(turn.lane.session_id)
      .Text("main")
      .Text(snapshot.request_id())
      .Text("anthropic")
      .Text(snapshot.model())
      .Int(request_us)
      .Int(response_us)
      .Int(1)
      .Int(1)
      .Text(Hex64(snapshot.system_hash()))
      .TextOrNull(SectionsJson(snapshot.system_sections()))
      .Int(snapshot.tools_size())
      .Text(Hex64(snapshot.options_hash()))
      .Int(1)
      .Int(0)
      .Int(snapshot.cache_control().ttl_seconds())
      .BytesOrNull(ChainBlob(snapshot.message_chain()))
      .Text("lexicographic")
      .Text(ToolListHash(snapshot.tools()))
      .TextOrNull(BreakpointsJson(snapshot.cache_control().breakpoints()))
      .Int(usage.uncached_input_tokens())
      .Int(usage.cache_read_tokens())
      .Int(usage.cache_write_tokens())
      .Int(usage.cache_write_5m_tokens())
      .Int(usage.cache_write_1h_tokens())
      .Int(usage.output_tokens())
      .Int(usage.uncached_input_tokens() + usage.cache_read_tokens() +
           usage.cache_write_tokens())
      .Text(turn.usage.raw_usage_json())
      .Text("ok")
      .Int(usage.cache_read_tokens())
      .Int(0)
      .Int(request_us);
}

constexpr const char* kCopyColumns =
    "agent, session_id, lane, request_id, provider, model, request_time_us, "
    "response_time_us, snapshot_received, usage_received, system_hash, "
    "system_sections, tool_count, options_hash, cache_enabled, "
    "cache_automatic, cache_ttl_seconds, message_chain, tool_order_policy, "
    "tool_list_hash, breakpoints, uncached_input_tokens, cache_read_tokens, "
    "cache_write_tokens, "
    "cache_write_5m_tokens, cache_write_1h_tokens, output_tokens, "
    "prompt_total_tokens, raw_usage_json, verdict, expected_reuse_tokens, "
    "missed_tokens, received_at_us";

void Exec(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_COPY_IN) {
    Die(sql + ": " + PQerrorMessage(conn));
  }
  PQclear(result);
}

// Inserts the tool lists of `turns`' snapshots and their entries into
// `url`'s database with the store's own statement (kPgInsertToolList), so
// that the rows COPY writes reference them as the store's rows do (and pay
// the same foreign-key check).
void InsertToolLists(const std::string& url,
                     const std::vector<std::vector<StoreTurn>>& turns) {
  absl::StatusOr<std::unique_ptr<PgConnection>> connection =
      PgConnection::Connect(url, std::chrono::milliseconds(60000));
  if (!connection.ok()) Die(connection.status().ToString());
  std::set<std::string> inserted;
  for (const std::vector<StoreTurn>& writer : turns) {
    for (const StoreTurn& turn : writer) {
      const v1::Snapshot& snapshot = *turn.snapshot;
      std::string list_hash = ToolListHash(snapshot.tools());
      if (!inserted.insert(list_hash).second) continue;
      std::vector<std::string> names, hashes;
      for (const v1::ToolRef& tool : snapshot.tools()) {
        names.push_back(tool.name());
        hashes.push_back(Hex64(tool.schema_hash()));
      }
      const absl::StatusOr<PgResult> result =
          (*connection)
              ->Query(kPgInsertToolList, PgParams()
                                             .Text(list_hash)
                                             .Int(snapshot.tools_size())
                                             .Text(PgTextArray(names))
                                             .Text(PgTextArray(hashes)));
      if (!result.ok()) Die(result.status().ToString());
    }
  }
}

// Rows per second through COPY, kRowsPerCopy per transaction.
double RunRaw(const std::string& url,
              const std::vector<std::vector<StoreTurn>>& turns) {
  OpenStore(url);  // The same schema and partitions.
  InsertToolLists(url, turns);
  std::vector<std::string> chunks;
  std::optional<PgBinaryRows> chunk;
  int64_t rows = 0;
  for (const std::vector<StoreTurn>& writer : turns) {
    for (const StoreTurn& turn : writer) {
      if (!chunk.has_value()) {
        chunk.emplace(kCopyTypes, PgBinaryRows::Layout::kCopy);
      }
      AddCopyRow(*chunk, turn);
      if (++rows % kRowsPerCopy == 0) {
        chunks.push_back(chunk->CopyData());
        chunk.reset();
      }
    }
  }
  if (chunk.has_value()) chunks.push_back(chunk->CopyData());
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) Die(PQerrorMessage(conn));
  Exec(conn, "SET synchronous_commit = on");
  const Clock::time_point start = Clock::now();
  for (const std::string& data : chunks) {
    Exec(conn, "BEGIN");
    Exec(conn, absl::StrCat("COPY turns (", kCopyColumns,
                            ") FROM STDIN (FORMAT binary)"));
    if (PQputCopyData(conn, data.data(), static_cast<int>(data.size())) != 1 ||
        PQputCopyEnd(conn, nullptr) != 1) {
      Die(PQerrorMessage(conn));
    }
    PGresult* result = PQgetResult(conn);
    if (PQresultStatus(result) != PGRES_COMMAND_OK) {
      Die(std::string("COPY: ") + PQerrorMessage(conn));
    }
    PQclear(result);
    while ((result = PQgetResult(conn)) != nullptr) PQclear(result);
    Exec(conn, "COMMIT");
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  PQfinish(conn);
  return rows / seconds;
}

// Creates the partitions of the `days` days before yesterday in `url`'s
// database (its schema made by the store first).
void CreatePastPartitions(const std::string& url, int days) {
  if (days <= 0) return;
  OpenStore(url);
  absl::StatusOr<std::unique_ptr<PgConnection>> connection =
      PgConnection::Connect(url, std::chrono::milliseconds(60000));
  if (!connection.ok()) Die(connection.status().ToString());
  const int64_t yesterday =
      PgDayOf(std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()) -
      1;
  std::vector<int64_t> past;
  for (int day = 1; day <= days; ++day) past.push_back(yesterday - day);
  const absl::Status status = PgCreatePartitions(**connection, past);
  if (!status.ok()) Die(status.ToString());
}

// The median of `values` (the mean of the middle two for an even count).
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle]
                                : (values[middle - 1] + values[middle]) / 2;
}

int Main(int argc, char** argv) {
  int writers = kDefaultWriters;
  int days = 0;
  int rounds = kDefaultRounds;
  TurnSpread spread = TurnSpread::kOneWrite;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--split") == 0) {
      spread = TurnSpread::kTwoWrites;
    } else if (std::strncmp(argv[i], "--writers=", 10) == 0) {
      writers = std::max(1, std::atoi(argv[i] + 10));
    } else if (std::strncmp(argv[i], "--days=", 7) == 0) {
      days = std::max(0, std::atoi(argv[i] + 7));
    } else if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::max(1, std::atoi(argv[i] + 9));
    } else {
      args.push_back(argv[i]);
    }
  }
  const std::optional<int> turns_per_writer =
      TurnsPerWriterFlag(static_cast<int>(args.size()), args.data(),
                         "pg_store_bench", 5000, kTurnsPerWrite);
  if (!turns_per_writer.has_value()) return 2;
  std::unique_ptr<testing::PostgresProcess> server =
      testing::PostgresProcess::Start();
  if (server == nullptr) Die("cannot start PostgreSQL");
  const std::vector<std::vector<StoreTurn>> turns =
      MakeWritersTurns(writers, *turns_per_writer);
  std::vector<double> raw_rates, store_rates, ratios;
  for (int round = 1; round <= rounds; ++round) {
    const std::string raw = absl::StrCat("raw", round);
    const std::string stored = absl::StrCat("store", round);
    if (!server->CreateDatabase(raw) || !server->CreateDatabase(stored)) {
      Die("cannot create the databases");
    }
    CreatePastPartitions(server->Url(raw), days);
    CreatePastPartitions(server->Url(stored), days);
    // Raw first in odd rounds, the store first in even ones.
    double raw_rate = 0;
    double store_rate = 0;
    if (round % 2 == 1) {
      raw_rate = RunRaw(server->Url(raw), turns);
      store_rate = RunStore(server->Url(stored), turns, spread);
    } else {
      store_rate = RunStore(server->Url(stored), turns, spread);
      raw_rate = RunRaw(server->Url(raw), turns);
    }
    raw_rates.push_back(raw_rate);
    store_rates.push_back(store_rate);
    ratios.push_back(store_rate / raw_rate);
    std::printf(
        "pg_store_bench: round %d/%d (%s first): PostgresStore::Write %.0f "
        "turns/s, raw COPY %.0f rows/s, ratio %.2f\n",
        round, rounds, round % 2 == 1 ? "raw" : "store", store_rate, raw_rate,
        ratios.back());
    std::fflush(stdout);
  }
  const double ratio = Median(ratios);
  std::printf(
      "pg_store_bench: %d turns, %d days of partitions before yesterday%s; "
      "medians of %d rounds: PostgresStore::Write %.0f turns/s (%d "
      "writers, %d turns/Write, 3 records/turn), raw COPY %.0f rows/s (%d "
      "rows/transaction); ratio %.2f (target >= %.2f) %s\n",
      writers * *turns_per_writer, days,
      spread == TurnSpread::kTwoWrites ? ", each turn over two Writes" : "",
      rounds, Median(store_rates), writers, kTurnsPerWrite, Median(raw_rates),
      kRowsPerCopy, ratio, kTarget, ratio >= kTarget ? "PASS" : "FAIL");
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
