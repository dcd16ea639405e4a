#include "daemon/store/postgres/pg_connection.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using Clock = std::chrono::steady_clock;

// The payload key under which a status carries its SQLSTATE.
constexpr const char* kSqlStatePayload = "cachewatch/sqlstate";
// query_canceled: statement_timeout, or a cancel request.
constexpr char kQueryCanceled[] = "57014";

bool IsUnavailableState(std::string_view state) {
  // 08: connection exception; 57P: operator intervention (shutdown, cannot
  // connect now); 53: insufficient resources (disk full, out of memory);
  // 40: transaction rollback (serialization failure, deadlock) - retryable.
  return state.starts_with("08") || state.starts_with("57P") ||
         state.starts_with("53") || state.starts_with("40");
}

}  // namespace

PgParams& PgParams::Text(std::string_view value) {
  values_.emplace_back(std::string(value));
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::TextOrNull(std::string_view value) {
  return value.empty() ? Null() : Text(value);
}

PgParams& PgParams::Int(int64_t value) { return Text(absl::StrCat(value)); }

PgParams& PgParams::Double(double value) {
  // Round-trips every double (absl::StrCat keeps 6 digits only).
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return Text(std::string_view(buffer, end - buffer));
}

PgParams& PgParams::Bytes(std::string_view value) {
  values_.emplace_back(std::string(value));
  formats_.push_back(1);
  return *this;
}

PgParams& PgParams::Binary(std::string value) {
  values_.emplace_back(std::move(value));
  formats_.push_back(1);
  return *this;
}

PgParams& PgParams::BytesOrNull(std::string_view value) {
  return value.empty() ? Null() : Bytes(value);
}

PgParams& PgParams::Null() {
  values_.emplace_back(std::nullopt);
  formats_.push_back(0);
  return *this;
}

bool PgRow::IsNull(int column) const {
  return PQgetisnull(result_, row_, column) != 0;
}

std::string_view PgRow::Text(int column) const {
  if (IsNull(column)) return {};
  return std::string_view(PQgetvalue(result_, row_, column),
                          PQgetlength(result_, row_, column));
}

int64_t PgRow::Int(int column) const {
  const std::string_view text = Text(column);
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

double PgRow::Double(int column) const {
  const std::string_view text = Text(column);
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::string PgRow::Blob(int column) const {
  if (IsNull(column)) return {};
  size_t length = 0;
  unsigned char* bytes = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(result_, row_, column)),
      &length);
  if (bytes == nullptr) return {};
  std::string blob(reinterpret_cast<const char*>(bytes), length);
  PQfreemem(bytes);
  return blob;
}

int64_t PgResult::affected() const {
  if (!result_) return 0;
  const char* tuples = PQcmdTuples(result_.get());
  int64_t value = 0;
  std::from_chars(tuples, tuples + std::char_traits<char>::length(tuples),
                  value);
  return value;
}

absl::Status PgResultStatus(const PGresult* result, std::string_view what) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const std::string sqlstate = state != nullptr ? state : "";
  std::string message = PQresultErrorMessage(result);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  absl::Status status =
      IsUnavailableState(sqlstate)
          ? absl::UnavailableError(
                absl::StrCat("PostgreSQL ", std::string(what), ": ", message))
          : absl::InternalError(absl::StrCat("PostgreSQL ", std::string(what),
                                             ": ", message, " [", sqlstate,
                                             "]"));
  if (!sqlstate.empty())
    status.SetPayload(kSqlStatePayload, absl::Cord(sqlstate));
  return status;
}

std::string SqlState(const absl::Status& status) {
  auto state = status.GetPayload(kSqlStatePayload);
  return state.has_value() ? std::string(*state) : std::string();
}

std::string PgTextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(
    const std::string& conninfo, std::chrono::milliseconds timeout) {
  const std::string connect_timeout =
      absl::StrCat(std::max<int64_t>(2, (timeout.count() + 999) / 1000));
  // Defaults first: settings in `conninfo` (expanded from "dbname") win.
  const char* keywords[] = {"connect_timeout",
                            "application_name",
                            "keepalives_idle",
                            "keepalives_interval",
                            "keepalives_count",
                            "dbname",
                            nullptr};
  const char* values[] = {
      connect_timeout.c_str(), "cachewatchd", "10", "5", "3",
      conninfo.c_str(),        nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    return absl::ResourceExhaustedError("PostgreSQL: out of memory");
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    PQfinish(conn);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL: ", message));
  }
  if (PQsetnonblocking(conn, 1) != 0) {
    PQfinish(conn);
    return absl::InternalError("PostgreSQL: cannot set non-blocking mode");
  }
  std::unique_ptr<PgConnection> connection(new PgConnection(conn, timeout));
  // statement_timeout: the server cancels a statement that runs past the
  // timeout itself, rolling its transaction back, before the client gives
  // up on the answer. Sent like any statement, so that a server that
  // accepted the connection but does not answer is given up on too.
  CACHEWATCH_RETURN_IF_ERROR(connection->Exec(absl::StrCat(
      "SET statement_timeout = ", std::max<int64_t>(1, timeout.count()))));
  return connection;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

bool PgConnection::ok() const {
  return !broken_ && PQstatus(conn_) == CONNECTION_OK;
}

absl::Status PgConnection::Error(std::string_view what) {
  broken_ = true;  // Whatever was in flight is lost.
  std::string message = PQerrorMessage(conn_);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return absl::UnavailableError(
      absl::StrCat("PostgreSQL ", std::string(what), ": ", message));
}

absl::Status PgConnection::ResultError(const PGresult* result,
                                       std::string_view what) {
  absl::Status status = PgResultStatus(result, what);
  if (SqlState(status) != kQueryCanceled) return status;
  absl::Status timed_out = absl::UnavailableError(
      absl::StrCat(status.message(), " (longer than the store timeout of ",
                   timeout_.count(), " ms)"));
  timed_out.SetPayload(kSqlStatePayload, absl::Cord(kQueryCanceled));
  return timed_out;
}

absl::Status PgConnection::Wait(bool write, Clock::time_point deadline) {
  pollfd fd{PQsocket(conn_), static_cast<short>(POLLIN | (write ? POLLOUT : 0)),
            0};
  if (fd.fd < 0) return Error("connection lost");
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      // The connection's state is unknown now: it must be replaced.
      broken_ = true;
      return absl::UnavailableError(absl::StrCat(
          "PostgreSQL did not answer within the store timeout (",
          timeout_.count(), " ms, plus ", kPgAnswerGrace.count(), " ms)"));
    }
    const int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return Error("poll failed");
  }
}

absl::Status PgConnection::Flush(Clock::time_point deadline) {
  while (true) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) return absl::OkStatus();
    if (flushed < 0) return Error("send failed");
    CACHEWATCH_RETURN_IF_ERROR(Wait(/*write=*/true, deadline));
    if (PQconsumeInput(conn_) == 0) return Error("receive failed");
  }
}

absl::StatusOr<PGresult*> PgConnection::NextResult(Clock::time_point deadline) {
  while (PQisBusy(conn_)) {
    CACHEWATCH_RETURN_IF_ERROR(Wait(/*write=*/false, deadline));
    if (PQconsumeInput(conn_) == 0) return Error("receive failed");
  }
  return PQgetResult(conn_);
}

absl::StatusOr<PgResult> PgConnection::Finish(bool sent) {
  if (!sent) return Error("send failed");
  const Clock::time_point deadline = Clock::now() + timeout_ + kPgAnswerGrace;
  CACHEWATCH_RETURN_IF_ERROR(Flush(deadline));
  PgResult last;
  absl::Status status;
  while (true) {
    absl::StatusOr<PGresult*> result = NextResult(deadline);
    if (!result.ok()) return result.status();
    if (*result == nullptr) break;
    const ExecStatusType type = PQresultStatus(*result);
    if (status.ok() && type != PGRES_COMMAND_OK && type != PGRES_TUPLES_OK) {
      status = ResultError(*result, "query failed");
    }
    last = PgResult(*result);
  }
  if (!status.ok()) return status;
  if (!ok()) return Error("connection lost");
  return last;
}

absl::Status PgConnection::Exec(const std::string& sql) {
  return Finish(PQsendQuery(conn_, sql.c_str()) == 1).status();
}

absl::StatusOr<PgResult> PgConnection::Query(const std::string& sql,
                                             const PgParams& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const std::optional<std::string>& value : params.values_) {
    values.push_back(value.has_value() ? value->data() : nullptr);
    lengths.push_back(value.has_value() ? static_cast<int>(value->size()) : 0);
  }
  return Finish(PQsendQueryParams(conn_, sql.c_str(), params.size(), nullptr,
                                  values.data(), lengths.data(),
                                  params.formats_.data(), 0) == 1);
}

absl::Status PgConnection::Prepare(const std::string& name,
                                   const std::string& sql) {
  if (prepared_.contains(name)) return absl::OkStatus();
  CACHEWATCH_RETURN_IF_ERROR(
      Finish(PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) == 1)
          .status());
  prepared_.insert(name);
  return absl::OkStatus();
}

absl::StatusOr<PgResult> PgConnection::Prepared(const std::string& name,
                                                const std::string& sql,
                                                const PgParams& params) {
  CACHEWATCH_RETURN_IF_ERROR(Prepare(name, sql));
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const std::optional<std::string>& value : params.values_) {
    values.push_back(value.has_value() ? value->data() : nullptr);
    lengths.push_back(value.has_value() ? static_cast<int>(value->size()) : 0);
  }
  return Finish(PQsendQueryPrepared(conn_, name.c_str(), params.size(),
                                    values.data(), lengths.data(),
                                    params.formats_.data(), 0) == 1);
}

absl::StatusOr<std::vector<PgResult>> PgConnection::RunPipeline(
    const std::vector<PgPipelineStep>& steps) {
  if (PQenterPipelineMode(conn_) != 1) return Error("cannot enter pipeline");
  const Clock::time_point deadline = Clock::now() + timeout_ + kPgAnswerGrace;
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const PgPipelineStep& step : steps) {
    values.clear();
    lengths.clear();
    for (const std::optional<std::string>& value : step.params.values_) {
      values.push_back(value.has_value() ? value->data() : nullptr);
      lengths.push_back(value.has_value() ? static_cast<int>(value->size())
                                          : 0);
    }
    if (PQsendQueryPrepared(conn_, step.statement.c_str(), step.params.size(),
                            values.data(), lengths.data(),
                            step.params.formats_.data(), 0) != 1) {
      return Error("pipeline send failed");
    }
    // Keep the output buffer small: send as we go.
    if (PQflush(conn_) < 0) return Error("send failed");
  }
  if (PQpipelineSync(conn_) != 1) return Error("pipeline sync failed");
  CACHEWATCH_RETURN_IF_ERROR(Flush(deadline));

  std::vector<PgResult> results;
  results.reserve(steps.size());
  absl::Status status;
  for (size_t i = 0; i < steps.size(); ++i) {
    absl::StatusOr<PGresult*> result = NextResult(deadline);
    if (!result.ok()) return result.status();
    if (*result == nullptr) return Error("pipeline ended early");
    const ExecStatusType type = PQresultStatus(*result);
    if (status.ok() && type != PGRES_COMMAND_OK && type != PGRES_TUPLES_OK &&
        type != PGRES_PIPELINE_ABORTED) {
      status = ResultError(
          *result, absl::StrCat("statement ", steps[i].statement, " failed"));
    }
    results.emplace_back(*result);
    // Each query's results end with a null.
    absl::StatusOr<PGresult*> end = NextResult(deadline);
    if (!end.ok()) return end.status();
    if (*end != nullptr) PQclear(*end);
  }
  absl::StatusOr<PGresult*> sync = NextResult(deadline);
  if (!sync.ok()) return sync.status();
  if (*sync == nullptr || PQresultStatus(*sync) != PGRES_PIPELINE_SYNC) {
    if (*sync != nullptr) PQclear(*sync);
    return Error("pipeline sync missing");
  }
  PQclear(*sync);
  if (PQexitPipelineMode(conn_) != 1) return Error("cannot leave pipeline");
  if (!status.ok()) return status;
  return results;
}

absl::StatusOr<int64_t> PgConnection::CopyIn(const std::string& sql,
                                             std::string_view data) {
  const Clock::time_point deadline = Clock::now() + timeout_ + kPgAnswerGrace;
  if (PQsendQuery(conn_, sql.c_str()) != 1) return Error("send failed");
  CACHEWATCH_RETURN_IF_ERROR(Flush(deadline));
  absl::StatusOr<PGresult*> started = NextResult(deadline);
  if (!started.ok()) return started.status();
  if (*started == nullptr) return Error("COPY ended early");
  const PgResult start(*started);
  if (PQresultStatus(*started) != PGRES_COPY_IN) {
    // The statement failed: its results end with a null.
    const absl::Status status = ResultError(*started, "COPY failed");
    while (true) {
      absl::StatusOr<PGresult*> rest = NextResult(deadline);
      if (!rest.ok()) return rest.status();
      if (*rest == nullptr) break;
      PQclear(*rest);
    }
    return status;
  }
  // libpq takes the data in pieces of at most INT_MAX bytes; in
  // non-blocking mode it may take none until its buffer is sent.
  constexpr size_t kPiece = size_t{1} << 20;
  for (size_t sent = 0; sent < data.size();) {
    const size_t piece = std::min(kPiece, data.size() - sent);
    const int put =
        PQputCopyData(conn_, data.data() + sent, static_cast<int>(piece));
    if (put < 0) return Error("COPY send failed");
    if (put == 0) {
      CACHEWATCH_RETURN_IF_ERROR(Flush(deadline));
      continue;
    }
    sent += piece;
  }
  int ended;
  while ((ended = PQputCopyEnd(conn_, nullptr)) == 0) {
    CACHEWATCH_RETURN_IF_ERROR(Flush(deadline));
  }
  if (ended < 0) return Error("COPY send failed");
  absl::StatusOr<PgResult> done = Finish(/*sent=*/true);
  if (!done.ok()) return done.status();
  return done->affected();
}

}  // namespace cachewatch
