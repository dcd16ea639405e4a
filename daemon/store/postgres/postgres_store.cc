// PostgresStore: group commit, the write pipeline, retention and the prober.
// The queries are in postgres_queries.cc.
#include "daemon/store/postgres/postgres_store.h"

#include <google/protobuf/util/time_util.h>
#include <xxhash.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/store/columns.h"
#include "daemon/store/postgres/pg_binary_rows.h"
#include "daemon/store/postgres/pg_schema.h"
#include "daemon/store/postgres/pg_write_statements.h"
#include "daemon/store/stale_lanes.h"
#include "daemon/store/turn_merge.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

// Rows one retention transaction deletes at most.
constexpr int kRetentionBatchRows = 1000;
// Partitions created ahead of today.
constexpr int kDaysAhead = 2;
// A turn's records are matched within this distance of their own time (a
// usage arrives seconds to minutes after its snapshot).
constexpr int64_t kTurnWindowUs = kPgDayUs;

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

// Session settings of every connection: durable commits (the store acks
// after COMMIT), a bound on how long a statement may wait for a lock, and
// generic plans (a custom plan per execution cost more planning than the
// write statements take to run; the writer's session below keeps those
// plans on the key indexes).
absl::Status SetUpSession(PgConnection& connection) {
  return connection.Exec(
      "SET synchronous_commit = on; SET lock_timeout = '30s'; "
      "SET TIME ZONE 'UTC'; SET client_min_messages = warning; "
      "SET plan_cache_mode = force_generic_plan");
}

}  // namespace

// The writer's session also keeps its statements off sequential, bitmap and
// index-only scans: a batch's generic plans are made at its first commit,
// and again whenever autovacuum analyzes a partition, when the day's
// partition may be empty or hold a few rows, and a plan that scanned the
// partition (or read a whole index) to find a turn would then read every
// row of the day for every turn (the commit time grew with the partition).
// Every write statement finds its rows by key; the turn lookup's one plain
// index scan is turns_by_key_hash (pg_write_statements.h).
absl::Status PgSetUpWriterSession(PgConnection& connection) {
  CACHEWATCH_RETURN_IF_ERROR(SetUpSession(connection));
  return connection.Exec(
      "SET enable_seqscan = off; SET enable_bitmapscan = off; "
      "SET enable_indexonlyscan = off");
}

namespace {

// Lanes whose last read write_seq a store remembers at most.
constexpr size_t kMaxSeenLanes = size_t{1} << 22;
// Tool lists a store remembers as stored at most.
constexpr size_t kMaxStoredToolLists = size_t{1} << 16;
// Commit attempts of a batch whose claims found stale lanes or that hit a
// deadlock.
constexpr int kMaxClaimAttempts = 4;

GroupCommitOptions GroupCommitOf(const PostgresStoreOptions& options) {
  GroupCommitOptions group;
  group.max_batch_delay = options.max_batch_delay;
  group.max_batch_records = options.max_batch_records;
  group.max_queued_records = options.max_queued_records;
  return group;
}

// A random id for this store's claims.
std::string NewWriterId() {
  std::random_device random;
  const uint64_t id = (static_cast<uint64_t>(random()) << 32) ^ random();
  return absl::StrCat("cachewatchd-", Hex64(id));
}

// The 1-based lane positions a CW001 claim failure names ("...: <1,3>").
std::vector<size_t> StalePositions(const absl::Status& status) {
  std::vector<size_t> positions;
  const std::string message(status.message());
  const size_t open = message.find(": <");
  const size_t close = message.find('>', open);
  if (open == std::string::npos || close == std::string::npos) {
    return positions;
  }
  for (absl::string_view part :
       absl::StrSplit(message.substr(open + 3, close - open - 3), ',')) {
    size_t position = 0;
    if (absl::SimpleAtoi(part, &position)) positions.push_back(position);
  }
  return positions;
}

std::string ProviderText(v1::Provider provider) {
  return provider == v1::PROVIDER_UNSPECIFIED
             ? std::string()
             : std::string(ProviderName(provider));
}

template <typename Enum>
std::string EnumOrEmpty(Enum value) {
  return EnumText(value);
}

void AddTime(PgParams& params, bool present,
             const google::protobuf::Timestamp& time) {
  if (present) {
    params.Int(TimeUtil::TimestampToMicroseconds(time));
  } else {
    params.Null();
  }
}

// The statements of one commit, in two pipelines around a COPY: first the
// lanes' locks and claims, the tool lists (a statement each) and the lookup
// of the batch's turns (their records merged per turn: one row each); then
// the turns not found, inserted by COPY; then the turns found, updated in
// one set-based statement, the breaks (a statement each) and COMMIT.
// A tool list `stored(hash)` says the server has is not inserted again (the
// turns' foreign key checks that it still is). The records added must
// outlive Rest().
class BatchBuilder {
 public:
  BatchBuilder(int64_t now_us,
               std::function<bool(const std::string& hash)> stored)
      : now_us_(now_us), stored_(std::move(stored)) {
    steps_.push_back({"cw_begin", {}});
    steps_.push_back({"cw_lock_lanes", {}});   // Parameters set in Finish().
    steps_.push_back({"cw_claim_lanes", {}});  // Parameters set in Finish().
  }

  void Add(const SnapshotWrite& write) {
    const v1::Snapshot& snapshot = *write.snapshot;
    std::string list_hash = ToolListHashOf(write);
    if (tool_lists_.insert(list_hash).second && !stored_(list_hash)) {
      new_tool_lists_.push_back(list_hash);
      std::vector<std::string> names, hashes;
      for (const v1::ToolRef& tool : snapshot.tools()) {
        names.push_back(tool.name());
        hashes.push_back(Hex64(tool.schema_hash()));
      }
      PgParams params;
      params.Text(list_hash)
          .Int(snapshot.tools_size())
          .Text(PgTextArray(names))
          .Text(PgTextArray(hashes));
      steps_.push_back({"cw_tool_list", std::move(params)});
    }
    const int64_t time_us =
        snapshot.has_request_time()
            ? TimeUtil::TimestampToMicroseconds(snapshot.request_time())
            : now_us_;
    Touch(write.key, time_us);
    const std::optional<size_t> index = merger_.Add(write);
    if (!index.has_value()) return;  // The first one counts.
    TurnTimes& turn = TimesOf(*index);
    turn.snapshot_time_us = time_us;
    turn.list_hash = std::move(list_hash);
    turn.Window(time_us - kTurnWindowUs, time_us + kTurnWindowUs);
  }

  void Add(const UsageWrite& write) {
    const int64_t time_us =
        write.usage.has_response_time()
            ? TimeUtil::TimestampToMicroseconds(write.usage.response_time())
            : now_us_;
    Touch(write.key, time_us);
    const std::optional<size_t> index = merger_.Add(write);
    if (!index.has_value()) return;  // The first one counts.
    TurnTimes& turn = TimesOf(*index);
    turn.usage_time_us = time_us;
    turn.Window(time_us - kTurnWindowUs, time_us + kTurnWindowUs);
  }

  void Add(const ClassificationWrite& write) {
    const v1::TurnClassification& classification = write.classification;
    const bool is_break = classification.verdict() == v1::VERDICT_BREAK;
    const v1::PromptCacheBreak& event = classification.cache_break();
    const int64_t time_us =
        is_break && event.has_request_time()
            ? TimeUtil::TimestampToMicroseconds(event.request_time())
            : now_us_;
    Touch(write.key, time_us);
    if (is_break) AddBreak(write.key, event, time_us);
    // The first final verdict counts, else the first pending one.
    const std::optional<size_t> index = merger_.Add(write);
    if (!index.has_value()) return;
    TurnTimes& turn = TimesOf(*index);
    turn.classification_time_us = time_us;
  }

  // The first pipeline's steps, from BEGIN to the turns' lookup; days():
  // the partitions the batch may write.
  // `seen(lane)`: what the claim of the lane checks against. `claimed`: the
  // lanes in the order of their claim.
  template <typename Seen>
  std::vector<PgPipelineStep> Finish(const std::string& writer_id,
                                     const Seen& seen,
                                     std::vector<LaneKey>& claimed) {
    std::vector<std::string> keys, agents, sessions, lanes;
    std::string seqs = "{";
    claimed.clear();
    for (const auto& [hash, key] : lanes_) {
      keys.push_back(absl::StrCat(hash));
      agents.push_back(key.agent);
      sessions.push_back(key.session_id);
      lanes.push_back(std::string(LaneColumn(key)));
      const std::optional<int64_t> seq = seen(hash);
      if (seqs.size() > 1) seqs += ',';
      seqs += seq.has_value() ? absl::StrCat(*seq) : "NULL";
      claimed.push_back(key);
    }
    seqs += '}';
    // The array literal of integers needs no quoting, but PgTextArray's
    // quotes are valid for bigint[] too.
    steps_[1].params.Text(PgTextArray(keys));
    steps_[2]
        .params.Text(writer_id)
        .Text(PgTextArray(agents))
        .Text(PgTextArray(sessions))
        .Text(PgTextArray(lanes))
        .Text(seqs);
    const std::vector<MergedTurn>& turns = merger_.turns();
    if (!turns.empty()) {
      PgBinaryRows lookups(kPgFindTurnsTypes, PgBinaryRows::Layout::kArrays);
      for (size_t i = 0; i < turns.size(); ++i) {
        AddLookup(lookups, turns[i], times_[i]);
      }
      steps_.push_back({"cw_find_turns", lookups.Params()});
    }
    return std::move(steps_);
  }

  // What the commit sends after Finish()'s steps: the turns not found by
  // COPY, then the turns found, the breaks and COMMIT in a pipeline.
  struct TurnWrites {
    std::string copy;  // kPgCopyTurns' data; empty: no turn to insert.
    std::vector<PgPipelineStep> steps;
  };

  // `found`: the result of Finish()'s last step, kPgFindTurns' when the
  // batch has turns.
  TurnWrites Rest(const PgResult& found) {
    const std::vector<MergedTurn>& turns = merger_.turns();
    // By merged turn: the request time of its row, if it has one.
    std::vector<std::optional<int64_t>> found_us(turns.size());
    for (int r = 0; r < found.rows() && !turns.empty(); ++r) {
      const int64_t ord = found.row(r).Int(0);
      if (ord >= 1 && static_cast<size_t>(ord) <= turns.size()) {
        found_us[ord - 1] = found.row(r).Int(1);
      }
    }
    PgBinaryRows inserts(kPgCopyTurnsTypes, PgBinaryRows::Layout::kCopy);
    PgBinaryRows updates(kPgUpdateTurnsTypes, PgBinaryRows::Layout::kArrays);
    for (size_t i = 0; i < turns.size(); ++i) {
      if (found_us[i].has_value()) {
        AddUpdateRow(updates, turns[i], times_[i], *found_us[i]);
      } else {
        AddNewRow(inserts, turns[i], times_[i], now_us_);
      }
    }
    TurnWrites writes;
    if (inserts.rows() > 0) writes.copy = inserts.CopyData();
    if (updates.rows() > 0) {
      writes.steps.push_back({"cw_update_turns", updates.Params()});
    }
    for (PgPipelineStep& step : breaks_) {
      writes.steps.push_back(std::move(step));
    }
    writes.steps.push_back({"cw_commit", {}});
    return writes;
  }

  std::vector<int64_t> days() const {
    return std::vector<int64_t>(days_.begin(), days_.end());
  }

  // The tool lists the steps insert (those not stored before).
  const std::vector<std::string>& new_tool_lists() const {
    return new_tool_lists_;
  }

 private:
  // What a merged turn (turn_merge.h) adds up to here: its records' times,
  // its snapshot's tool list, the window its row is looked up in.
  struct TurnTimes {
    int64_t snapshot_time_us = 0;
    int64_t usage_time_us = 0;
    int64_t classification_time_us = 0;
    std::string list_hash;
    // The request times its row is looked up among: the union of its
    // snapshot's and usage's windows. A turn with neither in the batch (a
    // classification alone) is looked up whatever its time: its row may
    // have been made by a record without a time of its own (at the daemon's
    // clock), and a second verdict must find it to leave it standing. With
    // its snapshot or usage in the batch the classification adds nothing to
    // the window: the turn is matched as those records alone would be, and
    // only the partitions within a day of them are probed (not every day in
    // retention).
    int64_t from_us = kMaxTime;
    int64_t until_us = kMinTime;

    void Window(int64_t from, int64_t until) {
      from_us = std::min(from_us, from);
      until_us = std::max(until_us, until);
    }
  };

  TurnTimes& TimesOf(size_t index) {
    if (times_.size() <= index) times_.resize(index + 1);
    return times_[index];
  }

  // Starts the turn's row with its key.
  static PgBinaryRows& AddKey(PgBinaryRows& rows, const MergedTurn& turn) {
    const LaneKey& key = *turn.key;
    return rows.Row()
        .Text(key.agent)
        .Text(key.session_id)
        .Text(LaneColumn(key))
        .Text(*turn.request_id);
  }

  // The row kPgFindTurns looks the turn up by.
  static void AddLookup(PgBinaryRows& rows, const MergedTurn& turn,
                        const TurnTimes& times) {
    const bool has_window = turn.snapshot != nullptr || turn.usage != nullptr;
    AddKey(rows, turn)
        .Int(has_window ? times.from_us : kMinTime)
        .Int(has_window ? times.until_us : kMaxTime);
  }

  // The request time a new row of the turn is inserted at.
  static int64_t NewTime(const MergedTurn& turn, const TurnTimes& times) {
    return turn.snapshot != nullptr ? times.snapshot_time_us
           : turn.usage != nullptr  ? times.usage_time_us
                                    : times.classification_time_us;
  }

  // kPgUpdateTurns' row of a turn whose row has request time `found_us`.
  static void AddUpdateRow(PgBinaryRows& rows, const MergedTurn& turn,
                           const TurnTimes& times, int64_t found_us) {
    AddKey(rows, turn)
        .Int(found_us)
        .Bool(turn.snapshot != nullptr)
        .Bool(turn.usage != nullptr)
        .Bool(turn.classification != nullptr);
    if (turn.snapshot == nullptr) {
      rows.Nulls(15);
    } else {
      const v1::Snapshot& snapshot = *turn.snapshot->snapshot;
      rows.TextOrNull(ProviderText(snapshot.provider()))
          .TextOrNull(snapshot.model())
          .Int(times.snapshot_time_us);
      AddSnapshotColumns(rows, snapshot, times.list_hash,
                         EnumOrEmpty(snapshot.expected_drop()));
    }
    if (turn.usage == nullptr) {
      rows.Nulls(13);
    } else {
      const v1::Usage& usage = turn.usage->usage;
      rows.TextOrNull(ProviderText(usage.provider())).TextOrNull(usage.model());
      AddResponseTime(rows, usage);
      AddUsageColumns(rows, *turn.usage);
    }
    if (turn.classification == nullptr) {
      rows.Null();
    } else {
      rows.TextOrNull(
          EnumOrEmpty(turn.classification->classification.expected_drop()));
    }
    AddVerdict(rows, turn.classification);
  }

  // kPgCopyTurns' row of a turn not stored yet.
  static void AddNewRow(PgBinaryRows& rows, const MergedTurn& turn,
                        const TurnTimes& times, int64_t now_us) {
    const v1::Snapshot* snapshot =
        turn.snapshot != nullptr ? turn.snapshot->snapshot.get() : nullptr;
    const v1::Usage* usage =
        turn.usage != nullptr ? &turn.usage->usage : nullptr;
    // provider, model, expected_drop: the snapshot's, else the other
    // record's.
    std::string provider =
        snapshot != nullptr ? ProviderText(snapshot->provider()) : "";
    if (provider.empty() && usage != nullptr) {
      provider = ProviderText(usage->provider());
    }
    std::string_view model;
    if (snapshot != nullptr) model = snapshot->model();
    if (model.empty() && usage != nullptr) model = usage->model();
    std::string drop =
        snapshot != nullptr ? EnumOrEmpty(snapshot->expected_drop()) : "";
    if (drop.empty() && turn.classification != nullptr) {
      drop = EnumOrEmpty(turn.classification->classification.expected_drop());
    }
    AddKey(rows, turn)
        .TextOrNull(provider)
        .TextOrNull(model)
        .Int(NewTime(turn, times))
        .Int(snapshot != nullptr ? 1 : 0);
    if (snapshot != nullptr) {
      AddSnapshotColumns(rows, *snapshot, times.list_hash, drop);
    } else {
      rows.Nulls(10).TextOrNull(drop).Null();
    }
    if (usage != nullptr) {
      AddResponseTime(rows, *usage);
      rows.Int(1);
      AddUsageColumns(rows, *turn.usage);
    } else {
      rows.Null().Int(0).Nulls(10);
    }
    AddVerdict(rows, turn.classification);
    rows.Int(now_us);
  }

  // The snapshot's columns from system_hash to tool_order_policy, the order
  // of both statements; `expected_drop`: that column's value.
  static void AddSnapshotColumns(PgBinaryRows& rows,
                                 const v1::Snapshot& snapshot,
                                 const std::string& list_hash,
                                 std::string_view expected_drop) {
    rows.Text(Hex64(snapshot.system_hash()))
        .TextOrNull(SectionsJson(snapshot.system_sections()))
        .Text(list_hash)
        .Int(snapshot.tools_size());
    if (snapshot.options_hash() != 0) {
      rows.Text(Hex64(snapshot.options_hash()));
    } else {
      rows.Null();
    }
    if (snapshot.has_cache_control()) {
      const v1::CacheControl& control = snapshot.cache_control();
      rows.Int(control.enabled() ? 1 : 0)
          .Int(control.automatic() ? 1 : 0)
          .Int(control.ttl_seconds())
          .TextOrNull(BreakpointsJson(control.breakpoints()));
    } else {
      rows.Nulls(4);
    }
    rows.BytesOrNull(ChainBlob(snapshot.message_chain()))
        .TextOrNull(expected_drop)
        .TextOrNull(EnumOrEmpty(snapshot.tool_order_policy()));
  }

  static void AddResponseTime(PgBinaryRows& rows, const v1::Usage& usage) {
    if (usage.has_response_time()) {
      rows.Int(TimeUtil::TimestampToMicroseconds(usage.response_time()));
    } else {
      rows.Null();
    }
  }

  // The usage's columns from uncached_input_tokens to
  // provider_missed_tokens.
  static void AddUsageColumns(PgBinaryRows& rows, const UsageWrite& write) {
    const v1::Usage& usage = write.usage;
    const v1::NormalizedUsage& normalized = write.normalized;
    rows.Int(normalized.uncached_input_tokens())
        .Int(normalized.cache_read_tokens())
        .Int(normalized.cache_write_tokens())
        .Int(normalized.cache_write_5m_tokens())
        .Int(normalized.cache_write_1h_tokens())
        .Int(normalized.output_tokens())
        .Int(PromptTotalTokens(normalized))
        .TextOrNull(usage.raw_usage_json());
    if (usage.has_provider_diagnostics()) {
      rows.Text(usage.provider_diagnostics().cache_miss_reason())
          .Int(usage.provider_diagnostics().cache_missed_input_tokens());
    } else {
      rows.Nulls(2);
    }
  }

  // The classification's columns from verdict to missed_tokens (NULL
  // without one).
  static void AddVerdict(PgBinaryRows& rows, const ClassificationWrite* write) {
    if (write == nullptr) {
      rows.Nulls(5);
      return;
    }
    const v1::TurnClassification& classification = write->classification;
    rows.TextOrNull(EnumOrEmpty(classification.verdict()));
    if (classification.verdict() == v1::VERDICT_BREAK) {
      const v1::PromptCacheBreak& event = classification.cache_break();
      rows.Text(ReasonName(event.primary_reason())).Text(event.break_id());
    } else {
      rows.Nulls(2);
    }
    rows.Int(classification.expected_reuse_tokens())
        .Int(classification.missed_tokens());
  }

  void Touch(const LaneKey& key, int64_t time_us) {
    lanes_.try_emplace(PgLaneKey(key), key);
    days_.insert(PgDayOf(time_us));
  }

  void AddBreak(const LaneKey& key, const v1::PromptCacheBreak& event,
                int64_t time_us) {
    PgParams params;
    params.Text(event.break_id())
        .Text(key.agent)
        .Text(key.session_id)
        .Text(LaneColumn(key))
        .TextOrNull(ProviderText(event.provider()))
        .Text(event.previous_request_id())
        .Text(event.request_id())
        .TextOrNull(event.previous_model())
        .TextOrNull(event.model())
        .Text(ReasonName(event.primary_reason()))
        .Text(ReasonsJson(event.reasons()))
        .TextOrNull(EnumOrEmpty(event.evidence()))
        .Int(event.previous_cache_read_tokens())
        .Int(event.current_cache_read_tokens())
        .Int(event.expected_reuse_tokens())
        .Int(event.missed_tokens())
        .Int(event.prompt_total_tokens())
        .Int(event.cache_write_tokens())
        .Text(NamesJson(event.changed_tool_names()))
        .Text(NamesJson(event.added_tool_names()))
        .Text(NamesJson(event.removed_tool_names()))
        .Text(NamesJson(event.reordered_tool_names()))
        .Text(NamesJson(event.schema_changed_tool_names()))
        .Text(NamesJson(event.changed_system_sections()))
        .Int(event.first_changed_tool_index())
        .Int(event.first_changed_message_block())
        .Int(event.blocks_since_last_write())
        .Double(event.gap_seconds())
        .Int(event.ttl_seconds())
        .TextOrNull(EnumOrEmpty(event.ttl_source()));
    if (event.has_estimated_cost()) {
      params.Double(event.estimated_extra_cost_usd());
    } else {
      params.Null();
    }
    AddTime(params, event.has_previous_request_time(),
            event.previous_request_time());
    params.Int(time_us).TextOrNull(event.provider_miss_reason());
    if (event.provider_miss_reason().empty()) {
      params.Null();
    } else {
      params.Int(event.provider_missed_tokens());
    }
    params.TextOrNull(EnumOrEmpty(event.provider_agreement()))
        .Bytes(event.SerializeAsString());
    breaks_.push_back({"cw_break", std::move(params)});
    days_.insert(PgDayOf(time_us));
  }

  const int64_t now_us_;
  const std::function<bool(const std::string& hash)> stored_;
  std::vector<PgPipelineStep> steps_;
  // The batch's turns, each once, in the order of their first record.
  TurnMerger merger_{TurnMerger::Order::kCanonical};
  std::vector<TurnTimes> times_;        // By merged turn.
  std::vector<PgPipelineStep> breaks_;  // After the classifications.
  std::set<std::string> tool_lists_;    // Every list of the batch.
  std::vector<std::string> new_tool_lists_;
  std::map<int64_t, LaneKey> lanes_;  // By lock key: the locking order.
  std::set<int64_t> days_;
};

absl::Status PrepareWriteStatements(PgConnection& connection) {
  const std::pair<const char*, const char*> statements[] = {
      {"cw_begin", "BEGIN"},
      {"cw_commit", "COMMIT"},
      {"cw_lock_lanes", kPgLockLanes},
      {"cw_claim_lanes", kPgClaimLanes},
      {"cw_tool_list", kPgInsertToolList},
      {"cw_find_turns", kPgFindTurns},
      {"cw_update_turns", kPgUpdateTurns},
      {"cw_break", kPgInsertBreak},
  };
  for (const auto& [name, sql] : statements) {
    CACHEWATCH_RETURN_IF_ERROR(connection.Prepare(name, sql));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t PgLaneKey(const LaneKey& key) {
  std::string bytes = key.agent;
  bytes.push_back('\0');
  bytes += key.session_id;
  bytes.push_back('\0');
  bytes += LaneColumn(key);
  return static_cast<int64_t>(XXH3_64bits(bytes.data(), bytes.size()));
}

bool IsPostgresUrl(std::string_view store) {
  return store.starts_with("postgres://") || store.starts_with("postgresql://");
}

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const PostgresStoreOptions& options) {
  auto writer = std::make_unique<PgPool>(options.url, 1, options.timeout,
                                         PgSetUpWriterSession);
  {
    absl::StatusOr<PgPool::Lease> connection = writer->Acquire();
    if (!connection.ok()) return connection.status();
    CACHEWATCH_RETURN_IF_ERROR(PgMigrate(**connection));
  }
  auto readers = std::make_unique<PgPool>(
      options.url, options.query_connections, options.timeout, SetUpSession);
  std::unique_ptr<PostgresStore> store(
      new PostgresStore(options, std::move(writer), std::move(readers)));
  {
    absl::StatusOr<PgPool::Lease> connection = store->writer_->Acquire();
    if (!connection.ok()) return connection.status();
    const int64_t today = PgDayOf(absl::ToUnixMicros(absl::Now()));
    std::vector<int64_t> days;
    for (int64_t day = today - 1; day <= today + kDaysAhead; ++day) {
      days.push_back(day);
    }
    CACHEWATCH_RETURN_IF_ERROR(store->EnsurePartitions(**connection, days));
  }
  store->prober_ = std::thread([s = store.get()] { s->ProbeLoop(); });
  return store;
}

PostgresStore::PostgresStore(const PostgresStoreOptions& options,
                             std::unique_ptr<PgPool> writer,
                             std::unique_ptr<PgPool> readers)
    : options_(options),
      writer_(std::move(writer)),
      readers_(std::move(readers)),
      writer_id_(NewWriterId()),
      queue_(GroupCommitOf(options),
             [this](std::vector<GroupCommitQueue::Unit>& batch) {
               return CommitBatch(batch);
             }) {}

void PostgresStore::NoteSeen(int64_t lane, int64_t write_seq) {
  std::lock_guard<std::mutex> lock(seen_mu_);
  if (seen_.size() >= kMaxSeenLanes && !seen_.contains(lane)) {
    seen_.clear();
    seen_overflowed_ = true;
  }
  int64_t& seen = seen_[lane];
  seen = std::max(seen, write_seq);
}

std::optional<int64_t> PostgresStore::SeenFor(int64_t lane) {
  std::lock_guard<std::mutex> lock(seen_mu_);
  auto it = seen_.find(lane);
  if (it != seen_.end()) return it->second;
  if (seen_overflowed_) return 0;
  return std::nullopt;
}

PostgresStore::~PostgresStore() {
  queue_.Close();
  {
    std::lock_guard<std::mutex> lock(probe_mu_);
    stopping_ = true;
    probe_changed_.notify_all();
  }
  if (prober_.joinable()) prober_.join();
}

void PostgresStore::ProbeLoop() {
  std::unique_lock<std::mutex> lock(probe_mu_);
  while (!stopping_) {
    probe_changed_.wait_for(lock, options_.probe_interval,
                            [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    absl::Status status;
    {
      absl::StatusOr<PgPool::Lease> connection = readers_->AcquireNow();
      status = connection.ok() ? (*connection)->Exec("SELECT 1")
                               : connection.status();
    }
    lock.lock();
    const bool was_reachable = reachable_;
    reachable_ = status.ok();
    probe_error_ = status.ok() ? std::string() : status.ToString();
    // The server is back: a commit that failed for want of it no longer
    // speaks for the store's health; the next Write() will tell.
    if (reachable_ && !was_reachable) queue_.ForgetLastFailure();
  }
}

absl::Status PostgresStore::Write(std::vector<StoreWrite> writes) {
  return queue_.Write(std::move(writes));
}

void PostgresStore::WriteAsync(std::vector<StoreWrite> writes, WriteDone done) {
  queue_.WriteAsync(std::move(writes), std::move(done));
}

absl::Status PostgresStore::EnsurePartitions(PgConnection& connection,
                                             const std::vector<int64_t>& days) {
  std::vector<int64_t> missing;
  {
    std::lock_guard<std::mutex> lock(partitions_mu_);
    for (int64_t day : days) {
      if (!known_days_.contains(day)) missing.push_back(day);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  CACHEWATCH_RETURN_IF_ERROR(PgCreatePartitions(connection, missing));
  std::lock_guard<std::mutex> lock(partitions_mu_);
  known_days_.insert(missing.begin(), missing.end());
  return absl::OkStatus();
}

absl::Status PostgresStore::CommitUnits(
    const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us,
    std::vector<LaneKey>& claimed) {
  BatchBuilder builder(
      now_us, [this](const std::string& hash) { return ToolListStored(hash); });
  for (const std::vector<StoreWrite>* unit : units) {
    for (const StoreWrite& write : *unit) {
      std::visit([&](const auto& record) { builder.Add(record); }, write);
    }
  }
  const std::vector<int64_t> days = builder.days();
  const std::vector<PgPipelineStep> steps = builder.Finish(
      writer_id_, [this](int64_t lane) { return SeenFor(lane); }, claimed);

  absl::StatusOr<PgPool::Lease> connection = writer_->Acquire();
  if (!connection.ok()) return connection.status();
  CACHEWATCH_RETURN_IF_ERROR(PrepareWriteStatements(**connection));
  CACHEWATCH_RETURN_IF_ERROR(EnsurePartitions(**connection, days));
  PgConnection& writer = **connection;
  // A failed step leaves the transaction its BEGIN opened aborted (or the
  // pipeline's implicit one rolled back): the session needs a ROLLBACK.
  const auto failed = [&writer](absl::Status status) {
    if (writer.ok()) writer.Exec("ROLLBACK").IgnoreError();
    return status;
  };
  absl::StatusOr<std::vector<PgResult>> results = writer.RunPipeline(steps);
  if (!results.ok()) return failed(results.status());
  BatchBuilder::TurnWrites rest = builder.Rest(results->back());
  if (!rest.copy.empty()) {
    absl::StatusOr<int64_t> copied = writer.CopyIn(kPgCopyTurns, rest.copy);
    if (!copied.ok()) return failed(copied.status());
  }
  results = writer.RunPipeline(rest.steps);
  if (!results.ok()) return failed(results.status());
  NoteToolListsStored(builder.new_tool_lists());
  return absl::OkStatus();
}

bool PostgresStore::ToolListStored(const std::string& hash) {
  std::lock_guard<std::mutex> lock(tool_lists_mu_);
  return stored_tool_lists_.contains(hash);
}

void PostgresStore::NoteToolListsStored(
    const std::vector<std::string>& hashes) {
  std::lock_guard<std::mutex> lock(tool_lists_mu_);
  if (stored_tool_lists_.size() + hashes.size() > kMaxStoredToolLists) {
    stored_tool_lists_.clear();
  }
  stored_tool_lists_.insert(hashes.begin(), hashes.end());
}

void PostgresStore::ForgetStoredToolLists() {
  std::lock_guard<std::mutex> lock(tool_lists_mu_);
  stored_tool_lists_.clear();
}

absl::Status PostgresStore::CommitBatch(
    std::vector<GroupCommitQueue::Unit>& batch) {
  if (options_.before_commit) {
    size_t records = 0;
    for (const GroupCommitQueue::Unit& unit : batch) {
      records += unit.writes->size();
    }
    options_.before_commit(records);
  }
  const absl::Time start = absl::Now();
  // The units still to commit: those whose lanes were found stale leave,
  // with their own status, and the rest is tried again.
  std::vector<GroupCommitQueue::Unit*> active;
  for (GroupCommitQueue::Unit& unit : batch) active.push_back(&unit);
  absl::Status status;
  for (int attempt = 1; !active.empty(); ++attempt) {
    std::vector<const std::vector<StoreWrite>*> units;
    units.reserve(active.size());
    for (const GroupCommitQueue::Unit* pending : active) {
      units.push_back(pending->writes);
    }
    std::vector<LaneKey> claimed;
    // Another daemon's retention may have dropped what this store believes
    // the server has: forget it and try again, once for each.
    bool days_forgotten = false;
    bool lists_forgotten = false;
    while (true) {
      status = CommitUnits(units, absl::ToUnixMicros(start), claimed);
      if (SqlState(status) == "23514" && !days_forgotten) {
        // No partition for a row.
        std::lock_guard<std::mutex> lock(partitions_mu_);
        known_days_.clear();
        days_forgotten = true;
      } else if (SqlState(status) == "23503" && !lists_forgotten) {
        // A turn's tool list is gone (the batch did not insert it).
        ForgetStoredToolLists();
        lists_forgotten = true;
      } else {
        break;
      }
    }
    if (attempt == kMaxClaimAttempts) break;
    // A deadlock or serialization failure rolled the transaction back
    // (tool lists and turn rows two daemons write at once): try again.
    if (SqlState(status).starts_with("40")) continue;
    if (SqlState(status) != "CW001") break;
    std::set<int64_t> stale;
    for (size_t position : StalePositions(status)) {
      if (position >= 1 && position <= claimed.size()) {
        stale.insert(PgLaneKey(claimed[position - 1]));
      }
    }
    if (stale.empty()) break;  // Not a claim failure this build made.
    std::vector<GroupCommitQueue::Unit*> remaining;
    for (GroupCommitQueue::Unit* pending : active) {
      std::vector<LaneKey> lanes;
      std::set<int64_t> named;
      for (const StoreWrite& write : *pending->writes) {
        const LaneKey& key = std::visit(
            [](const auto& record) -> const LaneKey& { return record.key; },
            write);
        const int64_t hash = PgLaneKey(key);
        if (stale.contains(hash) && named.insert(hash).second) {
          lanes.push_back(key);
        }
      }
      if (lanes.empty()) {
        remaining.push_back(pending);
      } else {
        pending->refused = StaleLanesError(lanes);
      }
    }
    active = std::move(remaining);
    if (active.empty()) status = absl::OkStatus();
  }
  if (SqlState(status) == "CW001") {
    status = absl::UnavailableError(
        "lane claims kept conflicting with other daemons' writes; retry");
  }

  if (status.ok()) {  // A commit is proof enough that the server is back.
    std::lock_guard<std::mutex> lock(probe_mu_);
    reachable_ = true;
    probe_error_.clear();
  }
  return status;
}

absl::StatusOr<int64_t> PostgresStore::DeleteOlderThan(int64_t cutoff_us) {
  int64_t total = 0;
  absl::StatusOr<PgPool::Lease> connection = readers_->Acquire();
  if (!connection.ok()) return connection.status();
  PgConnection& c = **connection;
  const int64_t today = PgDayOf(absl::ToUnixMicros(absl::Now()));
  std::vector<int64_t> ahead;
  for (int64_t day = today; day <= today + kDaysAhead; ++day) {
    ahead.push_back(day);
  }
  CACHEWATCH_RETURN_IF_ERROR(EnsurePartitions(c, ahead));

  absl::StatusOr<std::vector<PgPartition>> partitions = PgListPartitions(c);
  if (!partitions.ok()) return partitions.status();
  const int64_t cutoff_day = PgDayOf(cutoff_us);
  for (const PgPartition& partition : *partitions) {
    if (partition.day >= cutoff_day) {
      if (partition.day > cutoff_day) continue;
      // The partition holding the cutoff: its older rows, a batch at a time.
      while (true) {
        absl::StatusOr<PgResult> deleted = c.Query(
            absl::StrCat("DELETE FROM ", partition.name,
                         " WHERE ctid IN (SELECT ctid FROM ", partition.name,
                         " WHERE request_time_us < $1 LIMIT $2)"),
            PgParams().Int(cutoff_us).Int(kRetentionBatchRows));
        if (!deleted.ok()) return deleted.status();
        total += deleted->affected();
        if (deleted->affected() < kRetentionBatchRows) break;
      }
      continue;
    }
    // Wholly older than the cutoff: counted, then dropped.
    absl::StatusOr<PgResult> count =
        c.Query(absl::StrCat("SELECT count(*) FROM ", partition.name));
    if (!count.ok()) return count.status();
    CACHEWATCH_RETURN_IF_ERROR(
        c.Exec(absl::StrCat("DROP TABLE IF EXISTS ", partition.name)));
    total += count->row(0).Int(0);
    std::lock_guard<std::mutex> lock(partitions_mu_);
    known_days_.erase(partition.day);
  }
  while (true) {
    absl::StatusOr<PgResult> deleted =
        c.Query(R"sql(
DELETE FROM tool_lists WHERE list_hash IN (
  SELECT list_hash FROM tool_lists AS l
  WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tool_list_hash = l.list_hash)
  LIMIT $1))sql",
                PgParams().Int(kRetentionBatchRows));
    if (!deleted.ok()) {
      // A writer's new turn took a list as it was deleted: the next round
      // sees the list referenced.
      if (SqlState(deleted.status()) == "23503") break;
      return deleted.status();
    }
    total += deleted->affected();
    if (deleted->affected() < kRetentionBatchRows) break;
  }
  // The claims of lanes with no turn left (docs/FLEET.md, "A lane's state
  // across daemons"), not counted in the rows removed. A claim is deleted
  // only as it was read: one another daemon renews meanwhile (its commit
  // brings the lane's new turns) has a new write_seq and stays. A daemon
  // that read the lane before keeps its guarantee: whoever writes the lane
  // next claims it anew, with a write_seq above any it read.
  while (true) {
    absl::StatusOr<PgResult> deleted =
        c.Query(kPgDeleteIdleClaims, PgParams().Int(kRetentionBatchRows));
    if (!deleted.ok()) return deleted.status();
    if (deleted->affected() < kRetentionBatchRows) break;
  }
  return total;
}

absl::Status PostgresStore::ProbeWritable() {
  absl::Status status;
  // After a server restart every idle connection may be one the server
  // dropped: each failed use discards it and the pool replaces it, so up to
  // one attempt per connection, plus the one that connects anew. A failed
  // connection attempt ends the attempts. The pool's backoff does not
  // answer for the probe: a failed attempt (the prober's, or this probe's
  // while the server was down) would otherwise make the probe report a
  // server back since then unreachable for up to a second more.
  for (size_t attempt = 0; attempt <= readers_->size(); ++attempt) {
    absl::StatusOr<PgPool::Lease> connection = readers_->AcquireNow();
    if (!connection.ok()) {
      status = connection.status();
      break;
    }
    status =
        (*connection)
            ->Exec("BEGIN READ WRITE; SELECT pg_current_xact_id(); ROLLBACK");
    if (status.ok()) return status;
    if ((*connection)->ok()) (*connection)->Exec("ROLLBACK").IgnoreError();
  }
  return absl::UnavailableError(
      absl::StrCat("PostgreSQL cannot write: ", status.message()));
}

size_t PostgresStore::queued_records() const { return queue_.queued_records(); }

StoreStats PostgresStore::stats() const {
  StoreStats stats = queue_.stats();
  std::lock_guard<std::mutex> lock(probe_mu_);
  if (!reachable_) {
    stats.last_commit_failed = true;
    stats.last_error = probe_error_;
  }
  return stats;
}

}  // namespace cachewatch
