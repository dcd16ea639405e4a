#include "daemon/store/sqlite/write_connection.h"

#include <google/protobuf/util/time_util.h>
#include <sys/statvfs.h>

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/store/sqlite/columns.h"
#include "daemon/store/sqlite/schema.h"
#include "daemon/store/sqlite/write_statements.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int kBusyTimeoutMs = 5000;

constexpr const char* kDeleteTurns = R"sql(
DELETE FROM turns WHERE id IN (
  SELECT id FROM turns WHERE request_time_us < :cutoff_us LIMIT :limit))sql";

constexpr const char* kDeleteBreaks = R"sql(
DELETE FROM prompt_cache_breaks WHERE break_id IN (
  SELECT break_id FROM prompt_cache_breaks
  WHERE request_time_us < :cutoff_us LIMIT :limit))sql";

constexpr const char* kDeleteToolLists = R"sql(
DELETE FROM tool_lists WHERE list_hash IN (
  SELECT list_hash FROM tool_lists AS l
  WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tool_list_hash = l.list_hash)
  LIMIT :limit))sql";

void BindKey(Statement& statement, const LaneKey& key,
             const std::string& request_id) {
  statement.BindText(":agent", key.agent);
  statement.BindText(":session_id", key.session_id);
  statement.BindText(":lane", LaneColumn(key));
  statement.BindText(":request_id", request_id);
}

template <typename Enum>
void BindEnum(Statement& statement, const char* name, Enum value) {
  statement.BindTextOrNull(name, EnumText(value));
}

void BindProvider(Statement& statement, v1::Provider provider) {
  if (provider == v1::PROVIDER_UNSPECIFIED) {
    statement.BindNull(":provider");
  } else {
    statement.BindText(":provider", ProviderName(provider));
  }
}

void BindTime(Statement& statement, const char* name, bool present,
              const google::protobuf::Timestamp& time) {
  if (present) {
    statement.BindInt(name, TimeUtil::TimestampToMicroseconds(time));
  } else {
    statement.BindNull(name);
  }
}

absl::Status PrepareInto(Database& db, const char* sql, Statement& out) {
  CACHEWATCH_ASSIGN_OR_RETURN(Statement statement, db.Prepare(sql));
  out = std::move(statement);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<WriteConnection>> WriteConnection::Open(
    const std::string& path, bool synchronous_full) {
  CACHEWATCH_ASSIGN_OR_RETURN(Database db,
                              Database::Open(path, /*create=*/true));
  std::unique_ptr<WriteConnection> connection(
      new WriteConnection(std::move(db)));
  Database& d = connection->db_;
  CACHEWATCH_RETURN_IF_ERROR(
      d.Exec(absl::StrCat("PRAGMA busy_timeout = ", kBusyTimeoutMs)));
  CACHEWATCH_RETURN_IF_ERROR(CheckSchemaVersion(d));
  {
    CACHEWATCH_ASSIGN_OR_RETURN(Statement wal,
                                d.Prepare("PRAGMA journal_mode = WAL"));
    CACHEWATCH_ASSIGN_OR_RETURN(bool row, wal.Step());
    if (!row || wal.Text(0) != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot switch ", path, " to WAL journal mode"));
    }
  }
  CACHEWATCH_RETURN_IF_ERROR(d.Exec(synchronous_full
                                        ? "PRAGMA synchronous = FULL"
                                        : "PRAGMA synchronous = NORMAL"));
  CACHEWATCH_RETURN_IF_ERROR(d.Exec("PRAGMA foreign_keys = ON"));
  CACHEWATCH_RETURN_IF_ERROR(Migrate(d));
  CACHEWATCH_RETURN_IF_ERROR(connection->PrepareStatements());
  return connection;
}

absl::Status WriteConnection::PrepareStatements() {
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kInsertToolList, insert_tool_list_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kInsertToolEntry, insert_tool_entry_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kUpsertSnapshot, upsert_snapshot_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kUpsertUsage, upsert_usage_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kUpsertClassification, upsert_classification_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kInsertBreak, insert_break_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kDeleteTurns, delete_turns_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kDeleteBreaks, delete_breaks_));
  return PrepareInto(db_, kDeleteToolLists, delete_tool_lists_);
}

absl::Status WriteConnection::Commit(
    const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us) {
  // A transaction left open by a failure that SQLite could not roll back
  // would make BEGIN fail forever.
  if (db_.InTransaction()) db_.Exec("ROLLBACK").IgnoreError();
  Transaction transaction(db_);
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN IMMEDIATE"));
  for (const std::vector<StoreWrite>* unit : units) {
    for (const StoreWrite& write : *unit) {
      CACHEWATCH_RETURN_IF_ERROR(std::visit(
          [&](const auto& record) { return Apply(record, now_us); }, write));
    }
  }
  return transaction.Commit();
}

absl::Status WriteConnection::InternToolList(const std::string& list_hash,
                                             const v1::Snapshot& snapshot) {
  {
    StatementReset reset(insert_tool_list_);
    insert_tool_list_.BindText(":list_hash", list_hash);
    insert_tool_list_.BindInt(":tool_count", snapshot.tools_size());
    CACHEWATCH_RETURN_IF_ERROR(insert_tool_list_.Run());
  }
  if (db_.Changes() == 0) return absl::OkStatus();  // Stored before.
  for (int position = 0; position < snapshot.tools_size(); ++position) {
    const v1::ToolRef& tool = snapshot.tools(position);
    StatementReset reset(insert_tool_entry_);
    insert_tool_entry_.BindText(":list_hash", list_hash);
    insert_tool_entry_.BindInt(":position", position);
    insert_tool_entry_.BindText(":name", tool.name());
    insert_tool_entry_.BindText(":schema_hash", Hex64(tool.schema_hash()));
    CACHEWATCH_RETURN_IF_ERROR(insert_tool_entry_.Run());
  }
  return absl::OkStatus();
}

absl::Status WriteConnection::Apply(const SnapshotWrite& write,
                                    int64_t now_us) {
  const v1::Snapshot& snapshot = *write.snapshot;
  const std::string list_hash = ToolListHash(snapshot.tools());
  CACHEWATCH_RETURN_IF_ERROR(InternToolList(list_hash, snapshot));

  Statement& s = upsert_snapshot_;
  StatementReset reset(s);
  BindKey(s, write.key, snapshot.request_id());
  BindProvider(s, snapshot.provider());
  s.BindTextOrNull(":model", snapshot.model());
  BindTime(s, ":request_time_us", snapshot.has_request_time(),
           snapshot.request_time());
  s.BindText(":system_hash", Hex64(snapshot.system_hash()));
  s.BindTextOrNull(":system_sections",
                   SectionsJson(snapshot.system_sections()));
  s.BindText(":tool_list_hash", list_hash);
  s.BindInt(":tool_count", snapshot.tools_size());
  if (snapshot.options_hash() != 0) {
    s.BindText(":options_hash", Hex64(snapshot.options_hash()));
  } else {
    s.BindNull(":options_hash");
  }
  if (snapshot.has_cache_control()) {
    const v1::CacheControl& control = snapshot.cache_control();
    s.BindInt(":cache_enabled", control.enabled() ? 1 : 0);
    s.BindInt(":cache_automatic", control.automatic() ? 1 : 0);
    s.BindInt(":cache_ttl_seconds", control.ttl_seconds());
    s.BindTextOrNull(":breakpoints", BreakpointsJson(control.breakpoints()));
  } else {
    for (const char* name : {":cache_enabled", ":cache_automatic",
                             ":cache_ttl_seconds", ":breakpoints"}) {
      s.BindNull(name);
    }
  }
  if (snapshot.message_chain_size() > 0) {
    s.BindBlob(":message_chain", ChainBlob(snapshot.message_chain()));
  } else {
    s.BindNull(":message_chain");
  }
  BindEnum(s, ":expected_drop", snapshot.expected_drop());
  BindEnum(s, ":tool_order_policy", snapshot.tool_order_policy());
  s.BindInt(":received_at_us", now_us);
  return s.Run();
}

absl::Status WriteConnection::Apply(const UsageWrite& write, int64_t now_us) {
  const v1::Usage& usage = write.usage;
  const v1::NormalizedUsage& normalized = write.normalized;
  Statement& s = upsert_usage_;
  StatementReset reset(s);
  BindKey(s, write.key, usage.request_id());
  BindProvider(s, usage.provider());
  s.BindTextOrNull(":model", usage.model());
  BindTime(s, ":response_time_us", usage.has_response_time(),
           usage.response_time());
  s.BindInt(":uncached_input_tokens", normalized.uncached_input_tokens());
  s.BindInt(":cache_read_tokens", normalized.cache_read_tokens());
  s.BindInt(":cache_write_tokens", normalized.cache_write_tokens());
  s.BindInt(":cache_write_5m_tokens", normalized.cache_write_5m_tokens());
  s.BindInt(":cache_write_1h_tokens", normalized.cache_write_1h_tokens());
  s.BindInt(":output_tokens", normalized.output_tokens());
  s.BindInt(":prompt_total_tokens", PromptTotalTokens(normalized));
  s.BindTextOrNull(":raw_usage_json", usage.raw_usage_json());
  if (usage.has_provider_diagnostics()) {
    const v1::ProviderCacheDiagnostics& diagnostics =
        usage.provider_diagnostics();
    s.BindText(":provider_miss_reason", diagnostics.cache_miss_reason());
    s.BindInt(":provider_missed_tokens",
              diagnostics.cache_missed_input_tokens());
  } else {
    s.BindNull(":provider_miss_reason");
    s.BindNull(":provider_missed_tokens");
  }
  s.BindInt(":received_at_us", now_us);
  return s.Run();
}

absl::Status WriteConnection::Apply(const ClassificationWrite& write,
                                    int64_t now_us) {
  const v1::TurnClassification& classification = write.classification;
  const bool is_break = classification.verdict() == v1::VERDICT_BREAK;
  const v1::PromptCacheBreak& event = classification.cache_break();

  Statement& s = upsert_classification_;
  StatementReset reset(s);
  BindKey(s, write.key, write.request_id);
  BindTime(s, ":request_time_us", is_break && event.has_request_time(),
           event.request_time());
  BindEnum(s, ":expected_drop", classification.expected_drop());
  BindEnum(s, ":verdict", classification.verdict());
  if (is_break) {
    s.BindText(":primary_reason", ReasonName(event.primary_reason()));
    s.BindText(":break_id", event.break_id());
  } else {
    s.BindNull(":primary_reason");
    s.BindNull(":break_id");
  }
  s.BindInt(":expected_reuse_tokens", classification.expected_reuse_tokens());
  s.BindInt(":missed_tokens", classification.missed_tokens());
  s.BindInt(":received_at_us", now_us);
  CACHEWATCH_RETURN_IF_ERROR(s.Run());
  // The break of a turn that already had its verdict is not this turn's:
  // the stored verdict stands, and no break row is added beside it.
  if (!is_break || db_.Changes() == 0) return absl::OkStatus();
  return InsertBreak(write.key, event);
}

absl::Status WriteConnection::InsertBreak(const LaneKey& key,
                                          const v1::PromptCacheBreak& event) {
  Statement& s = insert_break_;
  StatementReset reset(s);
  s.BindText(":break_id", event.break_id());
  s.BindText(":agent", key.agent);
  s.BindText(":session_id", key.session_id);
  s.BindText(":lane", LaneColumn(key));
  BindProvider(s, event.provider());
  s.BindText(":previous_request_id", event.previous_request_id());
  s.BindText(":request_id", event.request_id());
  s.BindTextOrNull(":previous_model", event.previous_model());
  s.BindTextOrNull(":model", event.model());
  s.BindText(":primary_reason", ReasonName(event.primary_reason()));
  s.BindText(":reasons", ReasonsJson(event.reasons()));
  BindEnum(s, ":evidence", event.evidence());
  s.BindInt(":previous_cache_read_tokens", event.previous_cache_read_tokens());
  s.BindInt(":current_cache_read_tokens", event.current_cache_read_tokens());
  s.BindInt(":expected_reuse_tokens", event.expected_reuse_tokens());
  s.BindInt(":missed_tokens", event.missed_tokens());
  s.BindInt(":prompt_total_tokens", event.prompt_total_tokens());
  s.BindInt(":cache_write_tokens", event.cache_write_tokens());
  s.BindText(":changed_tool_names", NamesJson(event.changed_tool_names()));
  s.BindText(":added_tool_names", NamesJson(event.added_tool_names()));
  s.BindText(":removed_tool_names", NamesJson(event.removed_tool_names()));
  s.BindText(":reordered_tool_names", NamesJson(event.reordered_tool_names()));
  s.BindText(":schema_changed_tool_names",
             NamesJson(event.schema_changed_tool_names()));
  s.BindText(":changed_system_sections",
             NamesJson(event.changed_system_sections()));
  s.BindInt(":first_changed_tool_index", event.first_changed_tool_index());
  s.BindInt(":first_changed_message_block",
            event.first_changed_message_block());
  s.BindInt(":blocks_since_last_write", event.blocks_since_last_write());
  s.BindDouble(":gap_seconds", event.gap_seconds());
  s.BindInt(":ttl_seconds", event.ttl_seconds());
  BindEnum(s, ":ttl_source", event.ttl_source());
  if (event.has_estimated_cost()) {
    s.BindDouble(":estimated_extra_cost_usd", event.estimated_extra_cost_usd());
  } else {
    s.BindNull(":estimated_extra_cost_usd");
  }
  BindTime(s, ":previous_request_time_us", event.has_previous_request_time(),
           event.previous_request_time());
  BindTime(s, ":request_time_us", event.has_request_time(),
           event.request_time());
  s.BindTextOrNull(":provider_miss_reason", event.provider_miss_reason());
  if (event.provider_miss_reason().empty()) {
    s.BindNull(":provider_missed_tokens");
  } else {
    s.BindInt(":provider_missed_tokens", event.provider_missed_tokens());
  }
  BindEnum(s, ":provider_agreement", event.provider_agreement());
  s.BindBlob(":event", event.SerializeAsString());
  return s.Run();
}

absl::StatusOr<int64_t> WriteConnection::DeleteOlderBatch(int64_t cutoff_us,
                                                          int limit) {
  if (db_.InTransaction()) db_.Exec("ROLLBACK").IgnoreError();
  Transaction transaction(db_);
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN IMMEDIATE"));
  int64_t deleted = 0;
  for (Statement* statement : {&delete_turns_, &delete_breaks_}) {
    StatementReset reset(*statement);
    statement->BindInt(":cutoff_us", cutoff_us);
    statement->BindInt(":limit", limit);
    CACHEWATCH_RETURN_IF_ERROR(statement->Run());
    deleted += db_.Changes();
  }
  {
    StatementReset reset(delete_tool_lists_);
    delete_tool_lists_.BindInt(":limit", limit);
    CACHEWATCH_RETURN_IF_ERROR(delete_tool_lists_.Run());
    deleted += db_.Changes();
  }
  CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  return deleted;
}

absl::Status WriteConnection::SetMaxPageCount(int64_t pages) {
  // PRAGMA takes no bound parameters; `pages` is an integer.
  CACHEWATCH_ASSIGN_OR_RETURN(
      Statement pragma,
      db_.Prepare(absl::StrCat("PRAGMA max_page_count = ", pages)));
  return pragma.Run();
}

absl::Status WriteConnection::ProbeWritable(const std::string& path,
                                            int64_t headroom_bytes) {
  int64_t pragma[3];  // page_count, max_page_count, freelist_count
  const char* names[] = {"page_count", "max_page_count", "freelist_count"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Statement> query =
        db_.Prepare(absl::StrCat("PRAGMA ", names[i]));
    if (!query.ok()) return query.status();
    absl::StatusOr<bool> row = query->Step();
    if (!row.ok()) return row.status();
    pragma[i] = *row ? query->Int(0) : 0;
  }
  constexpr int64_t kPageBytes = 4096;
  const int64_t room_bytes = (pragma[1] - pragma[0] + pragma[2]) * kPageBytes;
  if (room_bytes < headroom_bytes) {
    return absl::UnavailableError(
        absl::StrCat("database is at its size cap (", pragma[0], " of ",
                     pragma[1], " pages, ", pragma[2], " free)"));
  }
  struct statvfs filesystem;
  if (statvfs(path.c_str(), &filesystem) == 0 &&
      static_cast<int64_t>(filesystem.f_bavail) *
              static_cast<int64_t>(filesystem.f_frsize) <
          headroom_bytes) {
    return absl::UnavailableError(
        absl::StrCat("file system of ", path, " is full"));
  }
  // A real write, rolled back: fails on a read-only database or file.
  absl::StatusOr<Statement> version = db_.Prepare("PRAGMA user_version");
  if (!version.ok()) return version.status();
  absl::StatusOr<bool> row = version->Step();
  if (!row.ok()) return row.status();
  const int64_t user_version = *row ? version->Int(0) : 0;
  absl::Status status = db_.Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  status = db_.Exec(absl::StrCat("PRAGMA user_version = ", user_version));
  const absl::Status rolled_back = db_.Exec("ROLLBACK");
  return status.ok() ? rolled_back : status;
}

void WriteConnection::HandOffCheckpoints(
    std::function<void(int wal_pages)> after_commit, int fallback_pages) {
  db_.HandOffCheckpoints(std::move(after_commit), fallback_pages);
}

}  // namespace cachewatch
