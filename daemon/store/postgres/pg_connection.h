// A thin RAII layer over libpq: one connection (PgConnection), the result of
// a statement (PgResult, rows read through PgRow), the parameters of a
// statement (PgParams: text, or binary for bytea), a pipeline of many
// prepared statements sent in one round trip (PgConnection::RunPipeline),
// and COPY's input (PgConnection::CopyIn).
//
// Errors map to absl::Status: a connection that is down or lost, or a
// server that is shutting down or cannot be reached, is Unavailable (the
// caller may retry once it is back); anything else the server refuses is
// Internal, naming the SQLSTATE and the server's message.
//
// The connection's timeout bounds every statement: the server cancels one
// that runs longer (statement_timeout, rolling its transaction back), and
// the call answers Unavailable naming the timeout. A server that sends
// nothing for the timeout plus kPgAnswerGrace is given up on (Unavailable,
// not a hang; the connection must then be replaced).
//
// Not thread-safe: one thread uses a PgConnection at a time (PgPool hands
// connections out). PgResult, PgParams and PgRow are plain values.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_CONNECTION_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_CONNECTION_H_

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cachewatch {

// How much longer than its timeout a connection waits for an answer: the
// server's own cancellation (statement_timeout) reaches the client first.
inline constexpr std::chrono::milliseconds kPgAnswerGrace{1000};

// The parameters of one statement, $1, $2, ... in the order added.
class PgParams {
 public:
  PgParams& Text(std::string_view value);
  PgParams& TextOrNull(std::string_view value);  // Empty -> NULL.
  PgParams& Int(int64_t value);
  PgParams& Double(double value);
  PgParams& Bytes(std::string_view value);  // A bytea, sent binary.
  PgParams& BytesOrNull(std::string_view value);
  // A value in the binary format of its parameter's type (an array, ...).
  PgParams& Binary(std::string value);
  PgParams& Null();

  int size() const { return static_cast<int>(values_.size()); }
  // The values as sent (nullopt: NULL) and their formats (0 text, 1 binary).
  const std::vector<std::optional<std::string>>& values() const {
    return values_;
  }
  const std::vector<int>& formats() const { return formats_; }

 private:
  friend class PgConnection;
  std::vector<std::optional<std::string>> values_;
  std::vector<int> formats_;  // 0 text, 1 binary.
};

// One row of a PgResult; columns are 0-based. Text results only.
class PgRow {
 public:
  PgRow(const PGresult* result, int row) : result_(result), row_(row) {}
  bool IsNull(int column) const;
  std::string_view Text(int column) const;  // "" for NULL.
  int64_t Int(int column) const;            // 0 for NULL or non-numeric.
  double Double(int column) const;
  std::string Blob(int column) const;  // A bytea column, unescaped.

 private:
  const PGresult* result_;
  int row_;
};

class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
  int rows() const { return result_ ? PQntuples(result_.get()) : 0; }
  PgRow row(int i) const { return PgRow(result_.get(), i); }
  // Rows a command changed (INSERT/UPDATE/DELETE), 0 otherwise.
  int64_t affected() const;

 private:
  std::shared_ptr<PGresult> result_;
};

// One statement of a pipeline: a prepared statement's name and its
// parameters.
struct PgPipelineStep {
  std::string statement;
  PgParams params;
};

class PgConnection {
 public:
  // Connects to `conninfo` (a postgres:// URL or key=value string; the
  // connection attempt gives up after libpq's connect_timeout, `timeout`
  // rounded up to whole seconds, at least 2) and sets the session's
  // statement_timeout to `timeout` (at least 1 ms). That statement and every
  // later round trip give up after `timeout` + kPgAnswerGrace.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(
      const std::string& conninfo, std::chrono::milliseconds timeout);

  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // False once the connection is lost; it must then be replaced.
  bool ok() const;

  // Runs `sql` (one or more statements, no parameters).
  absl::Status Exec(const std::string& sql);
  // Runs `sql` with parameters, unprepared.
  absl::StatusOr<PgResult> Query(const std::string& sql,
                                 const PgParams& params = {});
  // Runs the statement `name`, preparing it from `sql` on first use on this
  // connection.
  absl::StatusOr<PgResult> Prepared(const std::string& name,
                                    const std::string& sql,
                                    const PgParams& params);
  // Prepares `sql` as `name` unless this connection has it already.
  absl::Status Prepare(const std::string& name, const std::string& sql);

  // Sends every step (each a statement prepared before) in one pipeline and
  // one round trip, and waits for all their results. The steps run in order
  // until one fails; the rest are skipped. Callers wrap the steps in
  // BEGIN/COMMIT themselves (prepared as statements too) when they must be
  // atomic. Returns the results of the steps, in order.
  absl::StatusOr<std::vector<PgResult>> RunPipeline(
      const std::vector<PgPipelineStep>& steps);

  // Runs `sql`, a `COPY ... FROM STDIN`, sending `data` as its input (in
  // the format `sql` names). Returns the rows copied. Not in a pipeline;
  // inside a transaction a failure leaves it aborted, as any statement's.
  absl::StatusOr<int64_t> CopyIn(const std::string& sql, std::string_view data);

 private:
  PgConnection(PGconn* conn, std::chrono::milliseconds timeout)
      : conn_(conn), timeout_(timeout) {}

  // Waits until the socket is readable (and writable when `write`), or the
  // deadline passes.
  absl::Status Wait(bool write, std::chrono::steady_clock::time_point deadline);
  // Sends what libpq has buffered, reading meanwhile.
  absl::Status Flush(std::chrono::steady_clock::time_point deadline);
  // The next result (null at the end of a query's results).
  absl::StatusOr<PGresult*> NextResult(
      std::chrono::steady_clock::time_point deadline);
  // Sends a query and collects its single result.
  absl::StatusOr<PgResult> Finish(bool sent);
  absl::Status Error(std::string_view what);
  // PgResultStatus, naming the timeout when the server canceled the
  // statement for running past it.
  absl::Status ResultError(const PGresult* result, std::string_view what);

  PGconn* conn_;
  const std::chrono::milliseconds timeout_;
  std::set<std::string> prepared_;
  bool broken_ = false;
};

// The status of a failed result: Unavailable for connection and shutdown
// errors (SQLSTATE classes 08, 57P, 53), Internal otherwise.
absl::Status PgResultStatus(const PGresult* result, std::string_view what);

// The SQLSTATE of a status made by PgResultStatus, "" if none.
std::string SqlState(const absl::Status& status);

// `values` as a PostgreSQL array literal of text ('{"a","b\"c"}').
std::string PgTextArray(const std::vector<std::string>& values);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_CONNECTION_H_
