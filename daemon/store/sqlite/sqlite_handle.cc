#include "daemon/store/sqlite/sqlite_handle.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

// The start of a statement's text, for error messages.
std::string Abbreviated(std::string_view sql) {
  constexpr size_t kMaxChars = 60;
  const size_t start = sql.find_first_not_of(" \n");
  sql.remove_prefix(start == std::string_view::npos ? sql.size() : start);
  std::string text(sql.substr(0, kMaxChars));
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return sql.size() > kMaxChars ? text + "..." : text;
}

absl::Status StatusFor(int rc, std::string_view what, const char* message) {
  const std::string text =
      absl::StrCat("sqlite: ", std::string(what), ": ", message, " (",
                   sqlite3_errstr(rc), ", code ", rc, ")");
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return absl::UnavailableError(text);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(text);
    default:
      return absl::InternalError(text);
  }
}

}  // namespace

absl::StatusOr<Database> Database::Open(const std::string& path, bool create) {
  if (create) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
    }
    ::close(fd);
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = StatusFor(rc, absl::StrCat("open ", path),
                                    db != nullptr ? sqlite3_errmsg(db) : "");
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return Database(db);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      kept_(std::exchange(other.kept_, {})),
      wal_hook_(std::move(other.wal_hook_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    Close();
    db_ = std::exchange(other.db_, nullptr);
    kept_ = std::exchange(other.kept_, {});
    wal_hook_ = std::move(other.wal_hook_);
  }
  return *this;
}

Database::~Database() { Close(); }

void Database::Close() {
  for (const auto& [unused, stmt] : kept_) sqlite3_finalize(stmt);
  kept_.clear();
  sqlite3_close_v2(db_);
  db_ = nullptr;
}

absl::Status Database::Exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, Abbreviated(sql));
  return absl::OkStatus();
}

absl::Status Database::ExecKept(const std::string& sql) {
  sqlite3_stmt*& stmt = kept_[sql];
  if (stmt == nullptr) {
    const int rc =
        sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      kept_.erase(sql);
      return Error(rc, Abbreviated(sql));
    }
  }
  const int rc = sqlite3_step(stmt);
  // The error message is the connection's until its next call.
  absl::Status status =
      rc == SQLITE_DONE ? absl::OkStatus() : Error(rc, Abbreviated(sql));
  sqlite3_reset(stmt);
  return status;
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                         SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return Error(rc, absl::StrCat("prepare ", Abbreviated(sql)));
  }
  return Statement(stmt, db_);
}

absl::Status Database::Error(int rc, std::string_view what) const {
  return StatusFor(rc, what, sqlite3_errmsg(db_));
}

bool Database::InTransaction() const { return !sqlite3_get_autocommit(db_); }

int64_t Database::Changes() const { return sqlite3_changes64(db_); }

absl::StatusOr<uint32_t> Database::DataVersion() const {
  unsigned int version = 0;
  const int rc =
      sqlite3_file_control(db_, "main", SQLITE_FCNTL_DATA_VERSION, &version);
  if (rc != SQLITE_OK) return Error(rc, "data version");
  return version;
}

void Database::HandOffCheckpoints(
    std::function<bool(int wal_pages)> after_commit,
    std::function<void(bool busy)> checkpointed) {
  wal_hook_ = std::make_unique<WalHook>(
      WalHook{std::move(after_commit), std::move(checkpointed)});
  // Replaces the automatic checkpoint, which is itself a WAL hook.
  sqlite3_wal_hook(db_, &Database::OnWalCommit, wal_hook_.get());
}

int Database::OnWalCommit(void* hook, sqlite3* db, const char* schema,
                          int wal_pages) {
  const WalHook& wal_hook = *static_cast<const WalHook*>(hook);
  if (wal_hook.after_commit(wal_pages)) {
    // As the automatic checkpoint does. One that copies part of the WAL (a
    // reader still on old pages) or none of it (another connection's
    // checkpoint running) leaves the rest for a later try, as SQLite's does.
    wal_hook.checkpointed(sqlite3_wal_checkpoint(db, schema) == SQLITE_BUSY);
  }
  return SQLITE_OK;
}

absl::StatusOr<Database::CheckpointResult> Database::CheckpointPassive() {
  // The PRAGMA rather than sqlite3_wal_checkpoint_v2(): on a connection that
  // has read nothing yet, the call finds no WAL (its pager has not opened
  // one) and does nothing, where the PRAGMA reads the schema first.
  CACHEWATCH_ASSIGN_OR_RETURN(Statement pragma,
                              Prepare("PRAGMA wal_checkpoint(PASSIVE)"));
  CACHEWATCH_ASSIGN_OR_RETURN(bool row, pragma.Step());
  if (!row) return absl::InternalError("wal_checkpoint returned no row");
  // Busy: the WAL's locks are held (another connection's checkpoint, or a
  // commit for a moment), and the figures are -1.
  if (pragma.Int(0) != 0) {
    return absl::UnavailableError(
        "checkpoint: busy (the WAL's locks held by another checkpoint, or "
        "briefly by a commit)");
  }
  CheckpointResult result;
  result.wal_frames = static_cast<int>(pragma.Int(1));
  result.checkpointed_frames = static_cast<int>(pragma.Int(2));
  return result;
}

absl::Status Database::SyncDatabaseFile() {
  sqlite3_file* file = nullptr;
  int rc = sqlite3_file_control(db_, "main", SQLITE_FCNTL_FILE_POINTER, &file);
  if (rc != SQLITE_OK) return Error(rc, "database file");
  if (file == nullptr || file->pMethods == nullptr) {
    return absl::FailedPreconditionError("the database file is not open");
  }
  rc = file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
  if (rc != SQLITE_OK) {
    return StatusFor(rc, "sync the database file", sqlite3_errstr(rc));
  }
  return absl::OkStatus();
}

Statement::Statement(sqlite3_stmt* stmt, sqlite3* db) : stmt_(stmt), db_(db) {
  const int count = sqlite3_bind_parameter_count(stmt_);
  for (int index = 1; index <= count; ++index) {
    // Null for a nameless "?" parameter; a name used twice has one index.
    const char* name = sqlite3_bind_parameter_name(stmt_, index);
    if (name != nullptr) parameters_.emplace(name, index);
  }
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)),
      db_(other.db_),
      parameters_(std::move(other.parameters_)),
      bind_rc_(other.bind_rc_),
      bind_error_(std::move(other.bind_error_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    db_ = other.db_;
    parameters_ = std::move(other.parameters_);
    bind_rc_ = other.bind_rc_;
    bind_error_ = std::move(other.bind_error_);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

int Statement::Index(const char* name) {
  const auto it = parameters_.find(absl::string_view(name));
  if (it == parameters_.end()) {
    Check(SQLITE_RANGE, name);
    return 0;
  }
  return it->second;
}

void Statement::Check(int rc, const char* name) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) {
    bind_rc_ = rc;
    bind_error_ =
        absl::StrCat("bind ", name, " in ", Abbreviated(sqlite3_sql(stmt_)));
  }
}

void Statement::BindInt(const char* name, int64_t value) {
  Check(sqlite3_bind_int64(stmt_, Index(name), value), name);
}

void Statement::BindDouble(const char* name, double value) {
  Check(sqlite3_bind_double(stmt_, Index(name), value), name);
}

void Statement::BindText(const char* name, std::string_view value) {
  Check(sqlite3_bind_text64(stmt_, Index(name), value.data(), value.size(),
                            SQLITE_TRANSIENT, SQLITE_UTF8),
        name);
}

void Statement::BindBlob(const char* name, std::string_view bytes) {
  // A zero-length blob must not be bound from a null pointer (that is NULL).
  Check(
      sqlite3_bind_blob64(stmt_, Index(name), bytes.empty() ? "" : bytes.data(),
                          bytes.size(), SQLITE_TRANSIENT),
      name);
}

void Statement::BindNull(const char* name) {
  Check(sqlite3_bind_null(stmt_, Index(name)), name);
}

void Statement::BindTextOrNull(const char* name, std::string_view value) {
  if (value.empty()) {
    BindNull(name);
  } else {
    BindText(name, value);
  }
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) {
    return StatusFor(bind_rc_, bind_error_, sqlite3_errstr(bind_rc_));
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return StatusFor(rc, Abbreviated(sqlite3_sql(stmt_)), sqlite3_errmsg(db_));
}

absl::Status Statement::Run() {
  while (true) {
    CACHEWATCH_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_rc_ = SQLITE_OK;
  bind_error_.clear();
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::Double(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string_view Statement::Text(int column) const {
  const auto* text =
      reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) return {};
  return {text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

std::string_view Statement::Blob(int column) const {
  const auto* bytes =
      static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  if (bytes == nullptr) return {};
  return {bytes, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
}

Transaction::~Transaction() {
  if (open_ && db_.InTransaction()) {
    // A failed rollback leaves nothing to do: SQLite rolls back itself when
    // it cannot, and the next Begin() reports a connection still stuck.
    db_.ExecKept("ROLLBACK").IgnoreError();
  }
}

absl::Status Transaction::Begin(const char* begin_sql) {
  absl::Status status = db_.ExecKept(begin_sql);
  open_ = status.ok();
  return status;
}

absl::Status Transaction::Commit() {
  absl::Status status = db_.ExecKept("COMMIT");
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace cachewatch
