// A small RAII layer over the SQLite C API: a connection (Database), a
// prepared statement (Statement), a guard that rewinds a statement
// (StatementReset) and a transaction guard (Transaction). Failures are
// returned as absl::Status, never thrown.
//
// Result codes map to status codes by what the caller can do about them: a
// database that cannot be written or read right now (disk full, file size
// cap, read-only, I/O error, locked beyond the busy timeout, out of memory) is
// Unavailable; a damaged file or one that is not a database is DataLoss;
// anything else (a misused statement, a violated constraint) is Internal.
//
// Not thread-safe: a Database and its Statements are used by one thread at a
// time; callers serialize (connections are opened with SQLITE_OPEN_NOMUTEX).
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_HANDLE_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_HANDLE_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cachewatch {

class Statement;

// One connection. Move-only; closes on destruction (after its statements).
class Database {
 public:
  // Opens the database file at `path`. With `create`, a missing file is
  // created with mode 0600 (less the umask) first; without it, a missing
  // file is an error.
  static absl::StatusOr<Database> Open(const std::string& path, bool create);

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs SQL that binds no values (schema, PRAGMAs, transaction control);
  // `sql` may hold several statements.
  absl::Status Exec(const std::string& sql);

  // Prepares one statement for repeated use.
  absl::StatusOr<Statement> Prepare(std::string_view sql);

  // Runs one statement that binds no values and returns no rows
  // (transaction control: BEGIN, COMMIT, ROLLBACK), prepared on its first
  // use and kept for the connection's life: Exec() parses its SQL every
  // time, which for one record per transaction was ~4 % of the daemon's
  // samples under unary ingest (docs/PERFORMANCE.md round 8a).
  absl::Status ExecKept(const std::string& sql);

  // The status for result code `rc` of an operation on this connection;
  // `what` says which operation.
  absl::Status Error(int rc, std::string_view what) const;

  // Whether a transaction is open on this connection.
  bool InTransaction() const;

  // Rows inserted, updated or deleted by the last statement.
  int64_t Changes() const;

  // The file's data version as this connection last saw it
  // (SQLITE_FCNTL_DATA_VERSION): it changes with this connection's own
  // commits, and with any other connection's once this one starts a
  // transaction after them. A C call, no statement.
  absl::StatusOr<uint32_t> DataVersion() const;

  // Takes WAL checkpoints off this connection's commits. SQLite's automatic
  // checkpoint runs inside the COMMIT that takes the WAL past 1000 pages, on
  // the committing thread; instead, `after_commit` is called there after
  // every commit with the pages now in the WAL (it must not block) and
  // returns whether this commit should checkpoint the WAL itself, which it
  // then does (PASSIVE) before the COMMIT returns, telling `checkpointed`
  // whether that checkpoint found another connection's running (busy) and
  // copied nothing; other checkpoints are left to another connection.
  void HandOffCheckpoints(std::function<bool(int wal_pages)> after_commit,
                          std::function<void(bool busy)> checkpointed);

  // Frames of the WAL, and of them those now in the database file, after a
  // checkpoint.
  struct CheckpointResult {
    int wal_frames = 0;
    int checkpointed_frames = 0;
  };
  // A PASSIVE checkpoint: copies what it can without waiting for readers or
  // writers. Unavailable when another connection's checkpoint is running.
  absl::StatusOr<CheckpointResult> CheckpointPassive();

  // Flushes the database file (not its WAL) to the disk, as a checkpoint
  // that reaches the WAL's end does.
  absl::Status SyncDatabaseFile();

 private:
  struct WalHook {
    std::function<bool(int wal_pages)> after_commit;
    std::function<void(bool busy)> checkpointed;
  };
  static int OnWalCommit(void* hook, sqlite3* db, const char* schema,
                         int wal_pages);

  explicit Database(sqlite3* db) : db_(db) {}
  // Finalizes the kept statements and closes the connection.
  void Close();

  sqlite3* db_ = nullptr;
  // ExecKept()'s statements by their SQL; finalized before db_ closes.
  absl::flat_hash_map<std::string, sqlite3_stmt*> kept_;
  // Registered with db_ by HandOffCheckpoints; outlives it.
  std::unique_ptr<WalHook> wal_hook_;
};

// A prepared statement. Move-only; finalized on destruction.
//
// Parameters are bound by name (":agent"), each name's index looked up in a
// table made once at Prepare. A bind failure (an unknown name, a value too
// big) is reported by the next Step() or Run().
class Statement {
 public:
  // An empty statement, to be assigned one from Database::Prepare.
  Statement() = default;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  void BindInt(const char* name, int64_t value);
  void BindDouble(const char* name, double value);
  void BindText(const char* name, std::string_view value);
  void BindBlob(const char* name, std::string_view bytes);
  void BindNull(const char* name);
  // Binds NULL for an empty string, else the text.
  void BindTextOrNull(const char* name, std::string_view value);

  // Advances to the next row: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Steps to the end, for statements that return no rows.
  absl::Status Run();
  // Clears the bindings and rewinds, ending any read the statement holds.
  void Reset();

  // Columns of the current row, zero-based. Text and Blob views are valid
  // until the next Step() or Reset().
  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::string_view Text(int column) const;
  std::string_view Blob(int column) const;

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, sqlite3* db);
  int Index(const char* name);
  void Check(int rc, const char* name);

  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;  // Not owned.
  // Parameter name → index: sqlite3_bind_parameter_index compares the name
  // with every parameter's in turn, which a 60-parameter upsert bound by
  // name made 2.8 % of a Record stream's samples.
  absl::flat_hash_map<std::string, int> parameters_;
  int bind_rc_ = SQLITE_OK;  // First bind failure since the last Reset().
  std::string bind_error_;
};

// Resets a statement when it goes out of scope, so that no return path
// leaves it holding a read open (which would stall WAL checkpoints).
class StatementReset {
 public:
  explicit StatementReset(Statement& statement) : statement_(statement) {}
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;
  ~StatementReset() { statement_.Reset(); }

 private:
  Statement& statement_;
};

// A transaction that is rolled back on destruction unless committed.
class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // "BEGIN IMMEDIATE" to write (takes the write lock now, so a busy
  // database waits here rather than failing mid-transaction), "BEGIN" to
  // read a consistent snapshot. Begin, Commit and the rollback run through
  // Database::ExecKept.
  absl::Status Begin(const char* begin_sql);
  absl::Status Commit();

 private:
  Database& db_;
  bool open_ = false;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_SQLITE_HANDLE_H_
