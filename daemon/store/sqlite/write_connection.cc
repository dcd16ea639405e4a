#include "daemon/store/sqlite/write_connection.h"

#include <google/protobuf/util/time_util.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/store/columns.h"
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

// Returns the lists it deleted, whose entries go next (kDeleteToolEntries):
// the writer runs without foreign-key enforcement, so the schema's ON DELETE
// CASCADE does not act (see Open).
constexpr const char* kDeleteToolLists = R"sql(
DELETE FROM tool_lists WHERE list_hash IN (
  SELECT list_hash FROM tool_lists AS l
  WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tool_list_hash = l.list_hash)
  LIMIT :limit)
RETURNING list_hash)sql";

constexpr const char* kDeleteToolEntries = R"sql(
DELETE FROM tool_list_entries WHERE list_hash = :list_hash)sql";

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

// NULL for the unspecified provider.
void BindProvider(Statement& statement, const char* name,
                  v1::Provider provider) {
  if (provider == v1::PROVIDER_UNSPECIFIED) {
    statement.BindNull(name);
  } else {
    statement.BindText(name, ProviderName(provider));
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

// A snapshot's parameters of kUpsertTurn.
void BindSnapshot(Statement& s, const SnapshotWrite& write,
                  const std::string& list_hash) {
  const v1::Snapshot& snapshot = *write.snapshot;
  BindProvider(s, ":s_provider", snapshot.provider());
  s.BindTextOrNull(":s_model", snapshot.model());
  BindTime(s, ":s_request_time_us", snapshot.has_request_time(),
           snapshot.request_time());
  s.BindText(":system_hash", Hex64(snapshot.system_hash()));
  s.BindTextOrNull(":system_sections",
                   SectionsJson(snapshot.system_sections()));
  s.BindText(":tool_list_hash", list_hash);
  s.BindInt(":tool_count", snapshot.tools_size());
  if (snapshot.options_hash() != 0) {
    s.BindText(":options_hash", Hex64(snapshot.options_hash()));
  }
  if (snapshot.has_cache_control()) {
    const v1::CacheControl& control = snapshot.cache_control();
    s.BindInt(":cache_enabled", control.enabled() ? 1 : 0);
    s.BindInt(":cache_automatic", control.automatic() ? 1 : 0);
    s.BindInt(":cache_ttl_seconds", control.ttl_seconds());
    s.BindTextOrNull(":breakpoints", BreakpointsJson(control.breakpoints()));
  }
  if (snapshot.message_chain_size() > 0) {
    s.BindBlob(":message_chain", ChainBlob(snapshot.message_chain()));
  }
  BindEnum(s, ":s_expected_drop", snapshot.expected_drop());
  BindEnum(s, ":tool_order_policy", snapshot.tool_order_policy());
}

// A usage's parameters of kUpsertTurn.
void BindUsage(Statement& s, const UsageWrite& write) {
  const v1::Usage& usage = write.usage;
  const v1::NormalizedUsage& normalized = write.normalized;
  BindProvider(s, ":u_provider", usage.provider());
  s.BindTextOrNull(":u_model", usage.model());
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
  }
}

// A classification's parameters of kUpsertTurn, for any verdict but a
// break (whose break time and reason ApplyBreak writes).
void BindVerdict(Statement& s, const v1::TurnClassification& classification) {
  BindEnum(s, ":c_expected_drop", classification.expected_drop());
  BindEnum(s, ":verdict", classification.verdict());
  s.BindInt(":expected_reuse_tokens", classification.expected_reuse_tokens());
  s.BindInt(":missed_tokens", classification.missed_tokens());
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
  // Foreign keys are not enforced on this connection. With enforcement, every
  // upsert of a turn carries code to look its tool list up in tool_lists
  // (up to three lookups: the inserted row, an updated row's old and new
  // list) and SQLite's bookkeeping of constraint counters, which cost ~10 % of
  // the CPU per record under 4 Record streams (docs/PERFORMANCE.md, round
  // 21). The references stay whole by construction: a batch interns every
  // snapshot's list before its turns, in the same transaction
  // (InternToolList); retention deletes a list only when no turn references
  // it, and its entries with it (DeleteOlderBatch); and the lists this
  // connection remembers as stored are forgotten when another connection
  // commits (ForgetToolListsIfOthersCommitted), as another daemon's retention
  // may have deleted one.
  CACHEWATCH_RETURN_IF_ERROR(d.Exec("PRAGMA foreign_keys = OFF"));
  CACHEWATCH_RETURN_IF_ERROR(Migrate(d));
  CACHEWATCH_RETURN_IF_ERROR(connection->PrepareStatements());
  return connection;
}

absl::Status WriteConnection::PrepareStatements() {
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kInsertToolList, insert_tool_list_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kInsertToolEntry, insert_tool_entry_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kUpsertTurn, upsert_turn_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kUpsertTurnWithoutSnapshot,
                                         upsert_turn_without_snapshot_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kFillTurnRequestTime, fill_turn_request_time_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kUpsertClassification, upsert_classification_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kInsertBreak, insert_break_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kDeleteTurns, delete_turns_));
  CACHEWATCH_RETURN_IF_ERROR(PrepareInto(db_, kDeleteBreaks, delete_breaks_));
  CACHEWATCH_RETURN_IF_ERROR(
      PrepareInto(db_, kDeleteToolLists, delete_tool_lists_));
  return PrepareInto(db_, kDeleteToolEntries, delete_tool_entries_);
}

absl::Status WriteConnection::Commit(
    const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us) {
  // A transaction left open by a failure that SQLite could not roll back
  // would make BEGIN fail forever.
  if (db_.InTransaction()) db_.Exec("ROLLBACK").IgnoreError();
  interned_tool_lists_.clear();
  const absl::Status status = ApplyInTransaction(units, now_us);
  if (!status.ok()) {
    stored_tool_lists_.clear();
    return status;
  }
  RememberDataVersion();
  if (stored_tool_lists_.size() + interned_tool_lists_.size() >
      kMaxKnownToolLists) {
    stored_tool_lists_.clear();
  }
  for (std::string& list_hash : interned_tool_lists_) {
    stored_tool_lists_.insert(std::move(list_hash));
  }
  return absl::OkStatus();
}

absl::Status WriteConnection::ApplyInTransaction(
    const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us) {
  Transaction transaction(db_);
  CACHEWATCH_RETURN_IF_ERROR(transaction.Begin("BEGIN IMMEDIATE"));
  ForgetToolListsIfOthersCommitted();
  // The records merged per turn, in the order that keeps every record's
  // effect; every snapshot's tool list interned on the way, in record order
  // (a retried snapshot's too, as its own upsert did).
  TurnMerger merger(TurnMerger::Order::kAsWritten);
  struct Extra {
    std::string list_hash;      // Of its snapshot.
    size_t break_position = 0;  // Of its classification, in the batch.
  };
  std::vector<Extra> extras;  // By merged turn.
  size_t position = 0;
  for (const std::vector<StoreWrite>* unit : units) {
    for (const StoreWrite& write : *unit) {
      std::string list_hash;
      if (const auto* snapshot = std::get_if<SnapshotWrite>(&write)) {
        list_hash = ToolListHashOf(*snapshot);
        CACHEWATCH_RETURN_IF_ERROR(
            InternToolList(list_hash, *snapshot->snapshot));
      }
      const std::optional<size_t> index = merger.Add(write);
      if (index.has_value()) {
        if (extras.size() <= *index) extras.resize(*index + 1);
        if (!list_hash.empty()) extras[*index].list_hash = std::move(list_hash);
        if (std::holds_alternative<ClassificationWrite>(write)) {
          extras[*index].break_position = position;
        }
      }
      ++position;
    }
  }
  // The breaks the turns took, added in record order after every turn (as
  // each classification's own upsert added its break).
  std::vector<std::pair<size_t, const ClassificationWrite*>> breaks;
  const std::vector<MergedTurn>& turns = merger.turns();
  for (size_t i = 0; i < turns.size(); ++i) {
    bool took_break = false;
    CACHEWATCH_RETURN_IF_ERROR(
        ApplyTurn(turns[i], extras[i].list_hash, now_us, took_break));
    if (took_break) {
      breaks.emplace_back(extras[i].break_position, turns[i].classification);
    }
  }
  std::sort(breaks.begin(), breaks.end());
  for (const auto& [unused, write] : breaks) {
    CACHEWATCH_RETURN_IF_ERROR(
        InsertBreak(write->key, write->classification.cache_break()));
  }
  return transaction.Commit();
}

void WriteConnection::ForgetToolListsIfOthersCommitted() {
  const absl::StatusOr<uint32_t> version = db_.DataVersion();
  if (!version.ok() || !data_version_after_commit_.has_value() ||
      *version != *data_version_after_commit_) {
    stored_tool_lists_.clear();
  }
}

void WriteConnection::RememberDataVersion() {
  const absl::StatusOr<uint32_t> version = db_.DataVersion();
  if (version.ok()) {
    data_version_after_commit_ = *version;
  } else {
    data_version_after_commit_.reset();
  }
}

absl::Status WriteConnection::InternToolList(const std::string& list_hash,
                                             const v1::Snapshot& snapshot) {
  if (stored_tool_lists_.contains(list_hash)) return absl::OkStatus();
  interned_tool_lists_.push_back(list_hash);
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

absl::Status WriteConnection::ApplyTurn(const MergedTurn& turn,
                                        const std::string& list_hash,
                                        int64_t now_us, bool& took_break) {
  const ClassificationWrite* classification = turn.classification;
  const bool is_break =
      classification != nullptr &&
      classification->classification.verdict() == v1::VERDICT_BREAK;
  if (turn.snapshot != nullptr || turn.usage != nullptr ||
      (classification != nullptr && !is_break)) {
    if (turn.snapshot == nullptr && turn.usage != nullptr &&
        turn.usage->usage.has_response_time()) {
      Statement& fill = fill_turn_request_time_;
      StatementReset reset(fill);
      BindKey(fill, *turn.key, *turn.request_id);
      BindTime(fill, ":response_time_us", true,
               turn.usage->usage.response_time());
      CACHEWATCH_RETURN_IF_ERROR(fill.Run());
    }
    Statement& s =
        turn.snapshot != nullptr ? upsert_turn_ : upsert_turn_without_snapshot_;
    StatementReset reset(s);
    BindKey(s, *turn.key, *turn.request_id);
    s.BindInt(":received_at_us", now_us);
    s.BindInt(":has_snapshot", turn.snapshot != nullptr ? 1 : 0);
    s.BindInt(":has_usage", turn.usage != nullptr ? 1 : 0);
    s.BindInt(":has_classification",
              classification != nullptr && !is_break ? 1 : 0);
    if (turn.snapshot != nullptr) BindSnapshot(s, *turn.snapshot, list_hash);
    if (turn.usage != nullptr) BindUsage(s, *turn.usage);
    if (classification != nullptr && !is_break) {
      BindVerdict(s, classification->classification);
    }
    CACHEWATCH_RETURN_IF_ERROR(s.Run());
  }
  if (!is_break) return absl::OkStatus();
  return ApplyBreak(*classification, now_us, took_break);
}

absl::Status WriteConnection::ApplyBreak(const ClassificationWrite& write,
                                         int64_t now_us, bool& took) {
  const v1::TurnClassification& classification = write.classification;
  const v1::PromptCacheBreak& event = classification.cache_break();
  Statement& s = upsert_classification_;
  StatementReset reset(s);
  BindKey(s, write.key, write.request_id);
  BindTime(s, ":request_time_us", event.has_request_time(),
           event.request_time());
  BindEnum(s, ":expected_drop", classification.expected_drop());
  BindEnum(s, ":verdict", classification.verdict());
  s.BindText(":primary_reason", ReasonName(event.primary_reason()));
  s.BindText(":break_id", event.break_id());
  s.BindInt(":expected_reuse_tokens", classification.expected_reuse_tokens());
  s.BindInt(":missed_tokens", classification.missed_tokens());
  s.BindInt(":received_at_us", now_us);
  CACHEWATCH_RETURN_IF_ERROR(s.Run());
  // The break of a turn that already had its verdict is not this turn's:
  // the stored verdict stands, and no break row is added beside it.
  took = db_.Changes() > 0;
  return absl::OkStatus();
}

absl::Status WriteConnection::InsertBreak(const LaneKey& key,
                                          const v1::PromptCacheBreak& event) {
  Statement& s = insert_break_;
  StatementReset reset(s);
  s.BindText(":break_id", event.break_id());
  s.BindText(":agent", key.agent);
  s.BindText(":session_id", key.session_id);
  s.BindText(":lane", LaneColumn(key));
  BindProvider(s, ":provider", event.provider());
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
  // Before this commit's version is remembered, or another connection's
  // commit before it would go unseen.
  ForgetToolListsIfOthersCommitted();
  int64_t deleted = 0;
  for (Statement* statement : {&delete_turns_, &delete_breaks_}) {
    StatementReset reset(*statement);
    statement->BindInt(":cutoff_us", cutoff_us);
    statement->BindInt(":limit", limit);
    CACHEWATCH_RETURN_IF_ERROR(statement->Run());
    deleted += db_.Changes();
  }
  std::vector<std::string> deleted_lists;
  {
    StatementReset reset(delete_tool_lists_);
    delete_tool_lists_.BindInt(":limit", limit);
    while (true) {
      CACHEWATCH_ASSIGN_OR_RETURN(bool row, delete_tool_lists_.Step());
      if (!row) break;
      deleted_lists.emplace_back(delete_tool_lists_.Text(0));
    }
  }
  for (const std::string& list_hash : deleted_lists) {
    StatementReset reset(delete_tool_entries_);
    delete_tool_entries_.BindText(":list_hash", list_hash);
    CACHEWATCH_RETURN_IF_ERROR(delete_tool_entries_.Run());
  }
  // A deleted list must be inserted again by the next snapshot sending it.
  if (!deleted_lists.empty()) stored_tool_lists_.clear();
  deleted += static_cast<int64_t>(deleted_lists.size());
  CACHEWATCH_RETURN_IF_ERROR(transaction.Commit());
  RememberDataVersion();
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
    CACHEWATCH_ASSIGN_OR_RETURN(Statement query,
                                db_.Prepare(absl::StrCat("PRAGMA ", names[i])));
    CACHEWATCH_ASSIGN_OR_RETURN(const bool row, query.Step());
    pragma[i] = row ? query.Int(0) : 0;
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
  CACHEWATCH_ASSIGN_OR_RETURN(Statement version,
                              db_.Prepare("PRAGMA user_version"));
  CACHEWATCH_ASSIGN_OR_RETURN(const bool row, version.Step());
  const int64_t user_version = row ? version.Int(0) : 0;
  CACHEWATCH_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  const absl::Status status =
      db_.Exec(absl::StrCat("PRAGMA user_version = ", user_version));
  const absl::Status rolled_back = db_.Exec("ROLLBACK");
  return status.ok() ? rolled_back : status;
}

void WriteConnection::HandOffCheckpoints(
    std::function<bool(int wal_pages)> after_commit,
    std::function<void(bool busy)> checkpointed) {
  db_.HandOffCheckpoints(std::move(after_commit), std::move(checkpointed));
}

}  // namespace cachewatch
