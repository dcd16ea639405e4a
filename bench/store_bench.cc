// store_bench: rows/s of SqliteStore::Write against raw SQLite in the same run.
//
// Both sides write the same turns (records.h: a 50-tool snapshot, a usage
// with raw JSON, an OK classification; three rows of work per turn) to a
// fresh WAL database with synchronous=NORMAL on the same disk:
//   - store: kWriters threads each call SqliteStore::Write with batches of
//     kTurnsPerWrite turns, as stream handlers do; group commit joins them.
//   - raw: one thread, prepared statements, kRowsPerTransaction rows per
//     transaction, into tables of the store's shape (turns with its unique
//     key and indexes, content-addressed tool lists): an INSERT of the
//     snapshot columns, an upsert of the usage columns and an UPDATE of the
//     verdict per turn.
// The records are built before the clock starts. Prints both rates, the
// ratio and PASS/FAIL against the target (store >= 50 % of raw).
//
// Usage: store_bench [--turns=N] (per writer thread; default 5000)
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/store_turns.h"
#include "daemon/store/sqlite/sqlite_store.h"
#include "daemon/util/temp_dir.h"

namespace cachewatch::bench {
namespace {

constexpr int kWriters = 4;
constexpr int kTurnsPerWrite = 50;
constexpr int kRowsPerTransaction = 1000;
constexpr double kTarget = 0.5;

using Clock = std::chrono::steady_clock;

// Rows (3 per turn) per second through SqliteStore::Write.
double RunStore(const std::string& path,
                const std::vector<std::vector<StoreTurn>>& turns) {
  StoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "store_bench: %s\n",
                 store.status().ToString().c_str());
    std::exit(1);
  }
  return 3 * TimeStoreWrites(**store, turns, kTurnsPerWrite, "store_bench");
}

constexpr char kRawSchema[] = R"sql(
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE tool_lists (list_hash TEXT PRIMARY KEY, tool_count INTEGER);
CREATE TABLE tool_list_entries (
  list_hash TEXT NOT NULL REFERENCES tool_lists, position INTEGER NOT NULL,
  name TEXT NOT NULL, schema_hash TEXT NOT NULL,
  PRIMARY KEY (list_hash, position));
CREATE TABLE turns (
  id INTEGER PRIMARY KEY, agent TEXT NOT NULL, session_id TEXT NOT NULL,
  lane TEXT NOT NULL, request_id TEXT NOT NULL, provider TEXT, model TEXT,
  request_time_us INTEGER, response_time_us INTEGER,
  snapshot_received INTEGER NOT NULL DEFAULT 0,
  usage_received INTEGER NOT NULL DEFAULT 0, system_hash TEXT,
  system_sections TEXT, tool_list_hash TEXT REFERENCES tool_lists,
  tool_count INTEGER, options_hash TEXT, cache_enabled INTEGER,
  cache_automatic INTEGER, cache_ttl_seconds INTEGER, breakpoints TEXT,
  message_chain BLOB, expected_drop TEXT, tool_order_policy TEXT,
  uncached_input_tokens INTEGER, cache_read_tokens INTEGER,
  cache_write_tokens INTEGER, cache_write_5m_tokens INTEGER,
  cache_write_1h_tokens INTEGER, output_tokens INTEGER,
  prompt_total_tokens INTEGER, raw_usage_json TEXT,
  provider_miss_reason TEXT, provider_missed_tokens INTEGER, verdict TEXT,
  primary_reason TEXT, break_id TEXT, expected_reuse_tokens INTEGER,
  missed_tokens INTEGER, received_at_us INTEGER,
  UNIQUE (agent, session_id, lane, request_id));
CREATE INDEX turns_by_lane_time
  ON turns (agent, session_id, lane, request_time_us);
CREATE INDEX turns_by_time ON turns (request_time_us);
CREATE INDEX turns_by_tool_list ON turns (tool_list_hash);
)sql";

void Check(int rc, sqlite3* db, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return;
  std::fprintf(stderr, "store_bench: %s: %s\n", what, sqlite3_errmsg(db));
  std::exit(1);
}

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

// Prepared statements of the raw baseline, bound by position.
class RawWriter {
 public:
  explicit RawWriter(const std::string& path) {
    Check(sqlite3_open(path.c_str(), &db_), db_, "open");
    Check(sqlite3_exec(db_, kRawSchema, nullptr, nullptr, nullptr), db_,
          "schema");
    insert_list_ = Prepare(
        "INSERT OR IGNORE INTO tool_lists (list_hash, tool_count) "
        "VALUES (?, ?)");
    insert_entry_ = Prepare(
        "INSERT INTO tool_list_entries (list_hash, position, name, "
        "schema_hash) VALUES (?, ?, ?, ?)");
    insert_snapshot_ = Prepare(
        "INSERT INTO turns (agent, session_id, lane, request_id, provider, "
        "model, request_time_us, snapshot_received, system_hash, "
        "system_sections, tool_list_hash, tool_count, options_hash, "
        "cache_enabled, cache_ttl_seconds, breakpoints, message_chain, "
        "tool_order_policy, received_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, 1, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    upsert_usage_ = Prepare(
        "INSERT INTO turns (agent, session_id, lane, request_id, "
        "response_time_us, usage_received, uncached_input_tokens, "
        "cache_read_tokens, cache_write_tokens, cache_write_5m_tokens, "
        "output_tokens, raw_usage_json) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, "
        "?, ?, ?) ON CONFLICT (agent, session_id, lane, request_id) DO "
        "UPDATE SET response_time_us = excluded.response_time_us, "
        "usage_received = 1, uncached_input_tokens = "
        "excluded.uncached_input_tokens, cache_read_tokens = "
        "excluded.cache_read_tokens, cache_write_tokens = "
        "excluded.cache_write_tokens, cache_write_5m_tokens = "
        "excluded.cache_write_5m_tokens, output_tokens = "
        "excluded.output_tokens, raw_usage_json = excluded.raw_usage_json");
    update_verdict_ = Prepare(
        "UPDATE turns SET verdict = ?, expected_reuse_tokens = ? WHERE "
        "agent = ? AND session_id = ? AND lane = ? AND request_id = ?");
  }
  ~RawWriter() {
    for (sqlite3_stmt* statement :
         {insert_list_, insert_entry_, insert_snapshot_, upsert_usage_,
          update_verdict_}) {
      sqlite3_finalize(statement);
    }
    sqlite3_close(db_);
  }

  // Writes `turns` in transactions of kRowsPerTransaction rows; returns
  // rows (3 per turn) per second.
  double Run(const std::vector<std::vector<StoreTurn>>& turns) {
    const Clock::time_point start = Clock::now();
    int64_t rows = 0;
    int in_transaction = 0;
    Exec("BEGIN");
    for (const std::vector<StoreTurn>& writer_turns : turns) {
      for (const StoreTurn& turn : writer_turns) {
        WriteTurn(turn);
        rows += 3;
        in_transaction += 3;
        if (in_transaction >= kRowsPerTransaction) {
          Exec("COMMIT");
          Exec("BEGIN");
          in_transaction = 0;
        }
      }
    }
    Exec("COMMIT");
    return rows / std::chrono::duration<double>(Clock::now() - start).count();
  }

 private:
  sqlite3_stmt* Prepare(const char* sql) {
    sqlite3_stmt* statement = nullptr;
    Check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT,
                             &statement, nullptr),
          db_, sql);
    return statement;
  }
  void Exec(const char* sql) {
    Check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), db_, sql);
  }
  void Text(sqlite3_stmt* statement, int index, const std::string& text) {
    sqlite3_bind_text(statement, index, text.data(),
                      static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void Step(sqlite3_stmt* statement) {
    Check(sqlite3_step(statement), db_, "step");
    sqlite3_reset(statement);
  }
  void BindKey(sqlite3_stmt* statement, int first, const StoreTurn& turn) {
    Text(statement, first, turn.lane.agent);
    Text(statement, first + 1, turn.lane.session_id);
    Text(statement, first + 2, "main");
    Text(statement, first + 3, turn.usage.request_id());
  }

  void WriteTurn(const StoreTurn& turn) {
    const v1::Snapshot& snapshot = *turn.snapshot;
    // The content address of the tool list, as the store keeps it.
    std::string tools;
    for (const v1::ToolRef& tool : snapshot.tools()) {
      tools += tool.name();
      tools += Hex(tool.schema_hash());
    }
    const std::string list_hash = Hex(XXH3_64bits(tools.data(), tools.size()));
    Text(insert_list_, 1, list_hash);
    sqlite3_bind_int(insert_list_, 2, snapshot.tools_size());
    Step(insert_list_);
    if (sqlite3_changes(db_) > 0) {
      for (int i = 0; i < snapshot.tools_size(); ++i) {
        Text(insert_entry_, 1, list_hash);
        sqlite3_bind_int(insert_entry_, 2, i);
        Text(insert_entry_, 3, snapshot.tools(i).name());
        Text(insert_entry_, 4, Hex(snapshot.tools(i).schema_hash()));
        Step(insert_entry_);
      }
    }
    std::string sections = "[";
    for (const v1::SystemSection& section : snapshot.system_sections()) {
      sections += "{\"name\":\"" + section.name() + "\",\"hash\":\"" +
                  Hex(section.hash()) + "\"},";
    }
    sections.back() = ']';
    std::string breakpoints = "[";
    for (const v1::Breakpoint& breakpoint :
         snapshot.cache_control().breakpoints()) {
      breakpoints += "{\"segment\":" + std::to_string(breakpoint.segment()) +
                     ",\"index\":" + std::to_string(breakpoint.index()) +
                     ",\"ttl\":" + std::to_string(breakpoint.ttl_seconds()) +
                     "},";
    }
    breakpoints.back() = ']';
    const int64_t request_us = snapshot.request_time().seconds() * 1'000'000 +
                               snapshot.request_time().nanos() / 1000;
    sqlite3_stmt* s = insert_snapshot_;
    BindKey(s, 1, turn);
    Text(s, 5, "anthropic");
    Text(s, 6, snapshot.model());
    sqlite3_bind_int64(s, 7, request_us);
    Text(s, 8, Hex(snapshot.system_hash()));
    Text(s, 9, sections);
    Text(s, 10, list_hash);
    sqlite3_bind_int(s, 11, snapshot.tools_size());
    Text(s, 12, Hex(snapshot.options_hash()));
    sqlite3_bind_int(s, 13, 1);
    sqlite3_bind_int(s, 14, snapshot.cache_control().ttl_seconds());
    Text(s, 15, breakpoints);
    sqlite3_bind_blob(s, 16, snapshot.message_chain().data(),
                      snapshot.message_chain_size() * 8, SQLITE_TRANSIENT);
    Text(s, 17, "lexicographic");
    sqlite3_bind_int64(s, 18, request_us);
    Step(s);

    const v1::NormalizedUsage& usage = turn.usage.normalized();
    s = upsert_usage_;
    BindKey(s, 1, turn);
    sqlite3_bind_int64(s, 5, turn.usage.response_time().seconds());
    sqlite3_bind_int64(s, 6, usage.uncached_input_tokens());
    sqlite3_bind_int64(s, 7, usage.cache_read_tokens());
    sqlite3_bind_int64(s, 8, usage.cache_write_tokens());
    sqlite3_bind_int64(s, 9, usage.cache_write_5m_tokens());
    sqlite3_bind_int64(s, 10, usage.output_tokens());
    Text(s, 11, turn.usage.raw_usage_json());
    Step(s);

    s = update_verdict_;
    Text(s, 1, "ok");
    sqlite3_bind_int64(s, 2, usage.cache_read_tokens());
    BindKey(s, 3, turn);
    Step(s);
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_list_ = nullptr;
  sqlite3_stmt* insert_entry_ = nullptr;
  sqlite3_stmt* insert_snapshot_ = nullptr;
  sqlite3_stmt* upsert_usage_ = nullptr;
  sqlite3_stmt* update_verdict_ = nullptr;
};

int Main(int argc, char** argv) {
  const std::optional<int> turns_per_writer =
      TurnsPerWriterFlag(argc, argv, "store_bench", 5000, kTurnsPerWrite);
  if (!turns_per_writer.has_value()) return 2;
  const TempDir temp_dir("store_bench");
  const std::filesystem::path dir = temp_dir.path();
  const std::vector<std::vector<StoreTurn>> turns =
      MakeWritersTurns(kWriters, *turns_per_writer);
  double raw_rate = 0;
  {
    RawWriter raw((dir / "raw.db").string());
    raw_rate = raw.Run(turns);
  }
  const double store_rate = RunStore((dir / "store.db").string(), turns);
  const double ratio = store_rate / raw_rate;
  std::printf(
      "store_bench: %d turns x 3 rows; SqliteStore::Write %.0f rows/s (%d "
      "writers, "
      "%d turns/Write), raw SQLite %.0f rows/s (%d rows/transaction); ratio "
      "%.2f (target >= %.2f) %s\n",
      kWriters * *turns_per_writer, store_rate, kWriters, kTurnsPerWrite,
      raw_rate, kRowsPerTransaction, ratio, kTarget,
      ratio >= kTarget ? "PASS" : "FAIL");
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
