// The store contract, run against both stores: the SQLite store (a real
// file in a fresh directory) and the PostgreSQL store (a real PostgreSQL 15
// server started by the test, tests/support/postgres_process.h, a fresh
// database per test). The same records must give the same answers and the
// same rows (the SQL checks are portable). The PostgreSQL cases skip, with
// the reason, only where the PostgreSQL binaries are absent.
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/store/columns.h"
#include "daemon/store/postgres/postgres_store.h"
#include "daemon/store/sqlite/store_test_util.h"
#include "tests/support/postgres_process.h"

namespace cachewatch::testing {

// The PostgreSQL server shared by every test of this binary (started on
// first use, stopped at exit); null when it cannot run.
PostgresProcess* SharedPostgres() {
  static const std::unique_ptr<PostgresProcess> server =
      PostgresProcess::Start();
  return server.get();
}

namespace {

class SqliteBackend : public StoreTest {
 public:
  using StoreType = SqliteStore;
  static constexpr bool kPostgres = false;

  void SetUpBackend() {}
  std::unique_ptr<SqliteStore> Open() { return OpenStore(); }
  int64_t Query(const std::string& sql) { return QueryInt(sql); }
};

class PostgresBackend : public StoreTest {
 public:
  using StoreType = PostgresStore;
  static constexpr bool kPostgres = true;

  void SetUpBackend() {
    if (!PostgresProcess::Available()) {
      GTEST_SKIP() << PostgresProcess::SkipReason();
    }
    server_ = SharedPostgres();
    ASSERT_NE(server_, nullptr) << "PostgreSQL failed to start";
    static int databases = 0;
    database_ = absl::StrCat("conformance_", ++databases);
    ASSERT_TRUE(server_->CreateDatabase(database_));
  }

  PostgresStoreOptions PgOptions() const {
    PostgresStoreOptions options;
    options.url = server_->Url(database_);
    return options;
  }

  std::unique_ptr<PostgresStore> Open() { return Open(PgOptions()); }
  std::unique_ptr<PostgresStore> Open(const PostgresStoreOptions& options) {
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  int64_t Query(const std::string& sql) {
    const std::string out = server_->Psql(database_, sql);
    int64_t value = -1;
    if (!absl::SimpleAtoi(out, &value)) {
      ADD_FAILURE() << sql << ": " << out;
      return -1;
    }
    return value;
  }

  PostgresProcess* server_ = nullptr;
  std::string database_;
};

template <typename Backend>
class StoreConformanceTest : public Backend {
 protected:
  void SetUp() override {
    Backend::SetUp();
    this->SetUpBackend();
  }
  int64_t Count(const std::string& table) {
    return this->Query("SELECT count(*) FROM " + table);
  }
};

using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return T::kPostgres ? "Postgres" : "Sqlite";
  }
};
TYPED_TEST_SUITE(StoreConformanceTest, Backends, BackendNames);

std::vector<std::string> RequestIds(const v1::ListBreaksResponse& response) {
  std::vector<std::string> ids;
  for (const v1::PromptCacheBreak& event : response.breaks()) {
    ids.push_back(event.request_id());
  }
  return ids;
}

TYPED_TEST(StoreConformanceTest, ListBreaksReturnsTheWrittenBreakUnchanged) {
  auto store = this->Open();
  const v1::PromptCacheBreak event = WriteBrokenPair(*store, Key());
  absl::StatusOr<v1::ListBreaksResponse> list =
      store->ListBreaks(v1::ListBreaksRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->breaks_size(), 1);
  EXPECT_TRUE(ProtoEquals(event, list->breaks(0)));
  EXPECT_EQ(list->next_page_token(), "");
}

TYPED_TEST(StoreConformanceTest, ColumnsHoldTheDocumentedLayouts) {
  auto store = this->Open();
  WriteBrokenPair(*store, Key());
  EXPECT_EQ(
      this->Query("SELECT count(*) FROM prompt_cache_breaks WHERE "
                  "primary_reason = 'tools_order_changed' AND "
                  "reasons = '[\"tools_order_changed\",\"system_changed\"]' "
                  "AND evidence = 'client_explained' AND provider = "
                  "'anthropic' AND ttl_source = 'response_write_split' AND "
                  "provider_agreement = 'agree' AND "
                  "changed_tool_names = '[\"Bash\",\"Read\"]' AND "
                  "gap_seconds = 12.5 AND estimated_extra_cost_usd = 0.1683"),
      1);
  EXPECT_EQ(this->Query("SELECT count(*) FROM breaks_readable WHERE "
                        "request_time = '2026-09-21T14:14:20.000Z'"),
            1);
  EXPECT_EQ(
      this->Query("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                  "verdict = 'break' AND primary_reason = "
                  "'tools_order_changed' AND system_hash = "
                  "'fedcba9876543210' AND length(message_chain) = 32 AND "
                  "tool_order_policy = 'lexicographic' AND "
                  "prompt_total_tokens = 42500 AND snapshot_received = 1 AND "
                  "usage_received = 1 AND cache_enabled = 1"),
      1);
}

TYPED_TEST(StoreConformanceTest, ExplainBreakRebuildsBothSnapshots) {
  auto store = this->Open();
  const LaneKey key = Key();
  const v1::PromptCacheBreak event = WriteBrokenPair(*store, key);
  absl::StatusOr<v1::ExplainBreakResponse> explained =
      store->ExplainBreak(event.break_id());
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_TRUE(ProtoEquals(event, explained->cache_break()));
  EXPECT_TRUE(ProtoEquals(FullSnapshot(key, "r0", kT0),
                          explained->previous_snapshot()));
  EXPECT_TRUE(ProtoEquals(FullSnapshot(key, "r1", kT0 + 60 * kSecond),
                          explained->snapshot()));
}

TYPED_TEST(StoreConformanceTest, ExplainBreakLeavesMissingSnapshotsAbsent) {
  auto store = this->Open();
  const LaneKey key = Key();
  // A usage and a break, but no snapshot for either turn.
  const v1::PromptCacheBreak event = FullBreak(key, "r0", "r1", kT0);
  std::vector<StoreWrite> unit;
  unit.push_back(MakeUsage(key, "r1", kT0, Usage(0, 0, 50000)));
  unit.push_back(BreakWrite(event));
  ASSERT_TRUE(store->Write(std::move(unit)).ok());
  absl::StatusOr<v1::ExplainBreakResponse> explained =
      store->ExplainBreak(event.break_id());
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_FALSE(explained->has_previous_snapshot());
  EXPECT_FALSE(explained->has_snapshot());
  EXPECT_TRUE(
      absl::IsNotFound(store->ExplainBreak("0123456789abcdef").status()));
}

TYPED_TEST(StoreConformanceTest, RetriesDoNotDuplicateOrOverwriteRows) {
  auto store = this->Open();
  const LaneKey key = Key();
  WriteBrokenPair(*store, key);
  WriteBrokenPair(*store, key);
  // A retried snapshot with other content does not replace the first.
  v1::Snapshot changed = FullSnapshot(key, "r1", kT0 + 60 * kSecond);
  changed.set_model("other-model");
  ASSERT_TRUE(store
                  ->Write({SnapshotWrite{
                      key, std::make_shared<const v1::Snapshot>(changed)}})
                  .ok());
  ASSERT_TRUE(
      store->Write({MakeUsage(key, "r1", kT0 + 61 * kSecond, Usage(1, 1, 1))})
          .ok());
  EXPECT_EQ(this->Count("turns"), 2);
  EXPECT_EQ(this->Count("prompt_cache_breaks"), 1);
  EXPECT_EQ(this->Count("tool_lists"), 1);
  EXPECT_EQ(this->Count("tool_list_entries"), 3);
  EXPECT_EQ(this->Query("SELECT count(*) FROM turns WHERE request_id = 'r1' "
                        "AND model = 'claude-sonnet-4-5' AND "
                        "cache_read_tokens = 40000"),
            1);
}

TYPED_TEST(StoreConformanceTest,
           UsageBeforeSnapshotKeepsTheSnapshotsRequestTime) {
  auto store = this->Open();
  const LaneKey key = Key();
  ASSERT_TRUE(
      store->Write({MakeUsage(key, "r0", kT0 + 5 * kSecond, Usage(1, 2, 3))})
          .ok());
  EXPECT_EQ(this->Query("SELECT request_time_us FROM turns"),
            kT0 + 5 * kSecond);
  ASSERT_TRUE(
      store
          ->Write({SnapshotWrite{key, std::make_shared<const v1::Snapshot>(
                                          FullSnapshot(key, "r0", kT0))}})
          .ok());
  EXPECT_EQ(this->Count("turns"), 1);
  EXPECT_EQ(this->Query("SELECT request_time_us FROM turns"), kT0);
  EXPECT_EQ(this->Query("SELECT response_time_us FROM turns"),
            kT0 + 5 * kSecond);
  EXPECT_EQ(this->Query("SELECT snapshot_received + usage_received FROM turns"),
            2);
}

TYPED_TEST(StoreConformanceTest, PendingVerdictNeverReplacesAFinalOne) {
  auto store = this->Open();
  const LaneKey key = Key();
  ASSERT_TRUE(store->Write({Classified(key, "r0", v1::VERDICT_OK)}).ok());
  ASSERT_TRUE(store->Write({Classified(key, "r0", v1::VERDICT_PENDING)}).ok());
  absl::StatusOr<std::optional<v1::TurnClassification>> found =
      store->FindClassification(key, "r0");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->verdict(), v1::VERDICT_OK);
  EXPECT_EQ(this->Count("turns"), 1);
}

TYPED_TEST(StoreConformanceTest, IdenticalToolListsAreStoredOnce) {
  auto store = this->Open();
  const LaneKey key = Key();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(
        store
            ->Write({SnapshotWrite{
                key, std::make_shared<const v1::Snapshot>(FullSnapshot(
                         key, absl::StrCat("r", i), kT0 + i * kSecond))}})
            .ok());
  }
  v1::Snapshot reordered = FullSnapshot(key, "r100", kT0 + 100 * kSecond);
  reordered.mutable_tools()->SwapElements(0, 1);
  ASSERT_TRUE(store
                  ->Write({SnapshotWrite{
                      key, std::make_shared<const v1::Snapshot>(reordered)}})
                  .ok());
  EXPECT_EQ(this->Count("turns"), 101);
  EXPECT_EQ(this->Count("tool_lists"), 2);
  EXPECT_EQ(this->Count("tool_list_entries"), 6);
  EXPECT_EQ(this->Query("SELECT count(DISTINCT tool_list_hash) FROM turns"), 2);
}

TYPED_TEST(StoreConformanceTest, AToolListIsStoredUnderToolListHash) {
  auto store = this->Open();
  const LaneKey key = Key();
  // One snapshot with its list's hash carried (as the pipeline sends it),
  // one without (the store computes it): both rows, and the one list, under
  // ToolListHash of the tools.
  const v1::Snapshot carried = FullSnapshot(key, "r0", kT0);
  const v1::Snapshot computed = FullSnapshot(key, "r1", kT0 + kSecond);
  const std::string hash = ToolListHash(carried.tools());
  ASSERT_EQ(hash, ToolListHash(computed.tools()));
  ASSERT_TRUE(
      store
          ->Write(
              {SnapshotWrite{key, std::make_shared<const v1::Snapshot>(carried),
                             hash},
               SnapshotWrite{
                   key, std::make_shared<const v1::Snapshot>(computed), ""}})
          .ok());
  EXPECT_EQ(
      this->Query(absl::StrCat(
          "SELECT count(*) FROM turns WHERE tool_list_hash = '", hash, "'")),
      2);
  EXPECT_EQ(
      this->Query(absl::StrCat(
          "SELECT count(*) FROM tool_lists WHERE list_hash = '", hash, "'")),
      1);
  EXPECT_EQ(this->Count("tool_lists"), 1);
}

TYPED_TEST(StoreConformanceTest, ListBreaksFiltersCombineWithAnd) {
  auto store = this->Open();
  struct Row {
    LaneKey key;
    const char* request_id;
    int seconds;
    const char* model;
    v1::Reason reason;
  };
  const Row rows[] = {
      {Key("s1", "main", "a1"), "b1", 10, "m1", v1::REASON_TTL_EXPIRED},
      {Key("s1", "main", "a1"), "b2", 20, "m2", v1::REASON_MODEL_CHANGED},
      {Key("s1", "sub", "a1"), "b3", 30, "m1", v1::REASON_TTL_EXPIRED},
      {Key("s2", "main", "a1"), "b4", 40, "m1", v1::REASON_SYSTEM_CHANGED},
      {Key("s3", "main", "a2"), "b5", 50, "m1", v1::REASON_TTL_EXPIRED},
  };
  for (const Row& row : rows) {
    v1::PromptCacheBreak event =
        FullBreak(row.key, "prev", row.request_id, kT0 + row.seconds * kSecond,
                  row.reason);
    event.set_model(row.model);
    ASSERT_TRUE(store->Write({BreakWrite(event)}).ok());
  }
  auto list = [&](const v1::ListBreaksRequest& request) {
    absl::StatusOr<v1::ListBreaksResponse> response =
        store->ListBreaks(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? RequestIds(*response) : std::vector<std::string>{};
  };
  using Ids = std::vector<std::string>;
  v1::ListBreaksRequest request;
  EXPECT_EQ(list(request), (Ids{"b5", "b4", "b3", "b2", "b1"}));
  request.set_agent("a1");
  EXPECT_EQ(list(request), (Ids{"b4", "b3", "b2", "b1"}));
  request.set_session_id("s1");
  EXPECT_EQ(list(request), (Ids{"b3", "b2", "b1"}));
  request.set_lane("main");
  EXPECT_EQ(list(request), (Ids{"b2", "b1"}));
  request.set_model("m1");
  EXPECT_EQ(list(request), (Ids{"b1"}));
  request.Clear();
  request.set_reason(v1::REASON_TTL_EXPIRED);
  EXPECT_EQ(list(request), (Ids{"b5", "b3", "b1"}));
  *request.mutable_since() = Time(kT0 + 30 * kSecond);
  EXPECT_EQ(list(request), (Ids{"b5", "b3"}));
  *request.mutable_until() = Time(kT0 + 50 * kSecond);
  EXPECT_EQ(list(request), (Ids{"b3"}));
  request.set_model("m2");
  EXPECT_EQ(list(request), Ids{});
}

TYPED_TEST(StoreConformanceTest, ListBreaksPagesWithoutGapsOrDuplicates) {
  auto store = this->Open();
  constexpr int kBreaks = 250;
  std::vector<StoreWrite> breaks;
  for (int i = 0; i < kBreaks; ++i) {
    // Three breaks share each request time, so paging must order ties.
    breaks.push_back(
        BreakWrite(FullBreak(Key(absl::StrCat("s", i % 7)), "prev",
                             absl::StrCat("r", i), kT0 + (i / 3) * kSecond)));
  }
  ASSERT_TRUE(store->Write(std::move(breaks)).ok());
  v1::ListBreaksRequest request;
  request.set_page_size(100);
  std::vector<int> page_sizes;
  std::set<std::string> seen;
  std::tuple<int64_t, std::string> previous{INT64_MAX, ""};
  do {
    absl::StatusOr<v1::ListBreaksResponse> page = store->ListBreaks(request);
    ASSERT_TRUE(page.ok()) << page.status();
    page_sizes.push_back(page->breaks_size());
    for (const v1::PromptCacheBreak& event : page->breaks()) {
      EXPECT_TRUE(seen.insert(event.break_id()).second) << event.break_id();
      const std::tuple<int64_t, std::string> position{
          google::protobuf::util::TimeUtil::TimestampToMicroseconds(
              event.request_time()),
          event.break_id()};
      EXPECT_LT(position, previous) << "not newest first";
      previous = position;
    }
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty() && page_sizes.size() < 10);
  EXPECT_EQ(page_sizes, (std::vector<int>{100, 100, 50}));
  EXPECT_EQ(seen.size(), static_cast<size_t>(kBreaks));
  // Without a page size, pages hold 100.
  EXPECT_EQ(store->ListBreaks(v1::ListBreaksRequest())->breaks_size(), 100);
}

TYPED_TEST(StoreConformanceTest, ListBreaksRejectsBadPageTokensAndSizes) {
  auto store = this->Open();
  for (const std::string& token :
       {std::string("not a token!"), absl::WebSafeBase64Escape("no-colon"),
        absl::WebSafeBase64Escape("12x:abc"),
        absl::WebSafeBase64Escape("12:")}) {
    v1::ListBreaksRequest request;
    request.set_page_token(token);
    EXPECT_TRUE(absl::IsInvalidArgument(store->ListBreaks(request).status()))
        << token;
  }
  v1::ListBreaksRequest request;
  request.set_page_size(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(store->ListBreaks(request).status()));
}

TYPED_TEST(StoreConformanceTest, LaneTimelineReturnsRecentTurnsOldestFirst) {
  auto store = this->Open();
  const LaneKey key = Key();
  // Written newest first: the order comes from the request times.
  for (int i = 9; i >= 0; --i) {
    const std::string id = absl::StrCat("r", i);
    ASSERT_TRUE(store
                    ->Write(TurnUnit(key, id, kT0 + i * kSecond,
                                     Classified(key, id, v1::VERDICT_OK)))
                    .ok());
  }
  const v1::PromptCacheBreak event =
      FullBreak(key, "r9", "r10", kT0 + 10 * kSecond);
  ASSERT_TRUE(
      store->Write(TurnUnit(key, "r10", kT0 + 10 * kSecond, BreakWrite(event)))
          .ok());
  ASSERT_TRUE(
      store
          ->Write(TurnUnit(Key("other"), "x", kT0,
                           Classified(Key("other"), "x", v1::VERDICT_OK)))
          .ok());
  absl::StatusOr<v1::GetLaneTimelineResponse> timeline =
      store->LaneTimeline(key, 4);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  std::vector<std::string> ids;
  for (const v1::TurnSummary& turn : timeline->turns()) {
    ids.push_back(turn.request_id());
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"r7", "r8", "r9", "r10"}));
  const v1::TurnSummary& last = timeline->turns(3);
  EXPECT_TRUE(ProtoEquals(Time(kT0 + 10 * kSecond), last.request_time()));
  EXPECT_TRUE(ProtoEquals(Time(kT0 + 11 * kSecond), last.response_time()));
  EXPECT_EQ(last.model(), "claude-sonnet-4-5");
  EXPECT_TRUE(last.snapshot_received());
  EXPECT_TRUE(last.usage_received());
  EXPECT_TRUE(ProtoEquals(Usage(40000, 2000, 500), last.usage()));
  EXPECT_DOUBLE_EQ(last.hit_ratio(), 40000.0 / 42500.0);
  EXPECT_EQ(last.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(last.primary_reason(), v1::REASON_TOOLS_ORDER_CHANGED);
  EXPECT_EQ(last.break_id(), event.break_id());
  EXPECT_EQ(last.tool_count(), 3);
  EXPECT_EQ(timeline->turns(0).verdict(), v1::VERDICT_OK);
  EXPECT_EQ(timeline->turns(0).primary_reason(), v1::REASON_UNSPECIFIED);
  // An empty lane means "main"; the default limit covers all 11 turns.
  timeline = store->LaneTimeline(Key("s1", ""), 0);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(timeline->turns_size(), 11);
}

TYPED_TEST(StoreConformanceTest, FindClassificationAnswersRetries) {
  auto store = this->Open();
  const LaneKey key = Key();
  const v1::PromptCacheBreak event = FullBreak(key, "r0", "r1", kT0);
  ClassificationWrite drop = Classified(key, "r2", v1::VERDICT_EXPECTED_DROP);
  drop.classification.set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
  ClassificationWrite ok = Classified(key, "r3", v1::VERDICT_OK);
  ok.classification.set_missed_tokens(7);
  ASSERT_TRUE(store->Write(TurnUnit(key, "r1", kT0, BreakWrite(event))).ok());
  ASSERT_TRUE(store->Write({drop, ok}).ok());
  ASSERT_TRUE(
      store
          ->Write({SnapshotWrite{key, std::make_shared<const v1::Snapshot>(
                                          FullSnapshot(key, "r4", kT0))}})
          .ok());
  const std::pair<std::string, v1::TurnClassification> cases[] = {
      {"r1", BreakWrite(event).classification},
      {"r2", drop.classification},
      {"r3", ok.classification},
  };
  for (const auto& [request_id, expected] : cases) {
    absl::StatusOr<std::optional<v1::TurnClassification>> found =
        store->FindClassification(key, request_id);
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_TRUE(found->has_value()) << request_id;
    EXPECT_TRUE(ProtoEquals(expected, **found)) << request_id;
  }
  for (const char* request_id : {"r4", "unknown"}) {
    absl::StatusOr<std::optional<v1::TurnClassification>> found =
        store->FindClassification(key, request_id);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_FALSE(found->has_value()) << request_id;
  }
}

TYPED_TEST(StoreConformanceTest, LoadRecentLanesAfterReopening) {
  const LaneKey main = Key("s1", "main");
  const LaneKey sub = Key("s1", "sub");
  const LaneKey old = Key("s2", "main");
  {
    auto store = this->Open();
    std::vector<StoreWrite> r0 = TurnUnit(
        main, "r0", kT0, Classified(main, "r0", v1::VERDICT_COLD_START));
    std::get<UsageWrite>(r0[1]).normalized.set_cache_write_1h_tokens(2000);
    ASSERT_TRUE(store->Write(std::move(r0)).ok());
    std::vector<StoreWrite> r1 = TurnUnit(
        main, "r1", kT0 + 10 * kSecond, Classified(main, "r1", v1::VERDICT_OK));
    v1::ProviderCacheDiagnostics* diagnostics =
        std::get<UsageWrite>(r1[1]).usage.mutable_provider_diagnostics();
    diagnostics->set_cache_miss_reason("unavailable");
    diagnostics->set_cache_missed_input_tokens(12);
    ASSERT_TRUE(store->Write(std::move(r1)).ok());
    std::vector<StoreWrite> r2 = TurnUnit(
        main, "r2", kT0 + 20 * kSecond, Classified(main, "r2", v1::VERDICT_OK));
    r2.pop_back();
    ASSERT_TRUE(store->Write(std::move(r2)).ok());
    std::vector<StoreWrite> s0 = TurnUnit(
        sub, "s0", kT0 + 5 * kSecond, Classified(sub, "s0", v1::VERDICT_OK));
    std::get<UsageWrite>(s0[1]).normalized.set_cache_write_5m_tokens(2000);
    ASSERT_TRUE(store->Write(std::move(s0)).ok());
    ASSERT_TRUE(store
                    ->Write(TurnUnit(old, "o0", kT0 - 3600 * kSecond,
                                     Classified(old, "o0", v1::VERDICT_OK)))
                    .ok());
  }
  auto store = this->Open();
  absl::StatusOr<std::vector<RestoredLane>> lanes =
      store->LoadRecentLanes(kT0 - 60 * kSecond);
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  ASSERT_EQ(lanes->size(), 2u);
  const RestoredLane& restored_main =
      (*lanes)[0].key == main ? (*lanes)[0] : (*lanes)[1];
  const RestoredLane& restored_sub =
      (*lanes)[0].key == sub ? (*lanes)[0] : (*lanes)[1];
  ASSERT_EQ(restored_main.key, main);
  ASSERT_EQ(restored_sub.key, sub);
  const Turn& turn = *restored_main.state.last_turn;
  EXPECT_EQ(turn.request_id, "r1");
  ASSERT_NE(turn.snapshot, nullptr);
  EXPECT_TRUE(ProtoEquals(FullSnapshot(main, "r1", kT0 + 10 * kSecond),
                          *turn.snapshot));
  ASSERT_TRUE(turn.usage.has_value());
  EXPECT_TRUE(ProtoEquals(Usage(40000, 2000, 500), *turn.usage));
  ASSERT_TRUE(turn.provider_diagnostics.has_value());
  EXPECT_EQ(turn.provider_diagnostics->cache_miss_reason(), "unavailable");
  EXPECT_EQ(turn.provider_diagnostics->cache_missed_input_tokens(), 12);
  EXPECT_EQ(turn.provider, v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(turn.model, "claude-sonnet-4-5");
  EXPECT_EQ(turn.request_time_us, kT0 + 10 * kSecond);
  EXPECT_EQ(restored_main.state.observed_ttl_seconds, 3600u);
  EXPECT_EQ(restored_sub.state.last_turn->request_id, "s0");
  EXPECT_FALSE(restored_sub.state.last_turn->provider_diagnostics.has_value());
  EXPECT_EQ(restored_sub.state.observed_ttl_seconds, 300u);
}

// A lookup of a lane's classified turns only, whatever their age.
LaneLookup AnsweredOnly() {
  LaneLookup lookup;
  lookup.since_us = 0;
  lookup.waiting_since_us = std::numeric_limits<int64_t>::max();
  return lookup;
}

// A lane the tracker forgot: its baseline, its newest answers (a break's
// event included) and its waiting snapshot, from one lookup; a snapshot
// given up long ago stays given up; a lane never seen is nullopt.
TYPED_TEST(StoreConformanceTest, LoadLaneGivesTheLanesState) {
  const LaneKey key = Key("s1", "main");
  auto store = this->Open();
  for (int turn = 0; turn < 20; ++turn) {
    const std::string id = "r" + std::to_string(turn);
    ASSERT_TRUE(store
                    ->Write(TurnUnit(key, id, kT0 + turn * kSecond,
                                     Classified(key, id, v1::VERDICT_OK)))
                    .ok());
  }
  std::vector<StoreWrite> broken =
      TurnUnit(key, "r20", kT0 + 20 * kSecond,
               BreakWrite(FullBreak(key, "r19", "r20", kT0 + 20 * kSecond)));
  std::get<UsageWrite>(broken[1]).normalized.set_cache_write_1h_tokens(2000);
  ASSERT_TRUE(store->Write(std::move(broken)).ok());
  ASSERT_TRUE(store
                  ->Write({SnapshotWrite{
                      key, std::make_shared<const v1::Snapshot>(FullSnapshot(
                               key, "waiting", kT0 + 30 * kSecond))}})
                  .ok());

  const int64_t now = absl::ToUnixMicros(absl::Now());
  LaneLookup lookup;
  lookup.since_us = kT0 - 3600 * kSecond;
  lookup.waiting_since_us = now - 600 * kSecond;
  absl::StatusOr<std::optional<RestoredLane>> lane =
      store->LoadLane(key, lookup);
  ASSERT_TRUE(lane.ok()) << lane.status();
  ASSERT_TRUE(lane->has_value());
  const LaneState& state = (*lane)->state;
  ASSERT_TRUE(state.last_turn.has_value());
  EXPECT_EQ(state.last_turn->request_id, "r20");
  ASSERT_NE(state.last_turn->snapshot, nullptr);
  EXPECT_TRUE(ProtoEquals(FullSnapshot(key, "r20", kT0 + 20 * kSecond),
                          *state.last_turn->snapshot));
  EXPECT_EQ(state.observed_ttl_seconds, 3600u);
  ASSERT_EQ(state.answered.size(), 16u);
  EXPECT_EQ(state.answered.front().request_id, "r5");
  EXPECT_EQ(state.answered.back().request_id, "r20");
  EXPECT_EQ(state.answered.back().classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_TRUE(ProtoEquals(FullBreak(key, "r19", "r20", kT0 + 20 * kSecond),
                          state.answered.back().classification.cache_break()));
  EXPECT_EQ(state.answered.front().classification.expected_reuse_tokens(),
            40000);
  ASSERT_EQ(state.waiting.size(), 1u);
  EXPECT_EQ(state.waiting[0].turn.request_id, "waiting");
  EXPECT_NE(state.waiting[0].turn.snapshot, nullptr);
  EXPECT_FALSE(state.waiting[0].turn.usage.has_value());
  EXPECT_GE(state.waiting[0].received_us, now - 60 * kSecond);

  // Received before the pending timeout: given up, not waiting.
  lookup.waiting_since_us = now + kSecond;
  lane = store->LoadLane(key, lookup);
  ASSERT_TRUE(lane.ok() && lane->has_value());
  EXPECT_TRUE((*lane)->state.waiting.empty());
  // Retention bounds how far back.
  lookup.since_us = kT0 + 3600 * kSecond;
  lane = store->LoadLane(key, lookup);
  ASSERT_TRUE(lane.ok());
  EXPECT_FALSE(lane->has_value());
  lane = store->LoadLane(Key("never-seen"), LaneLookup{});
  ASSERT_TRUE(lane.ok());
  EXPECT_FALSE(lane->has_value());
}

// The TTL shown by a turn older than the answers read is still found.
TYPED_TEST(StoreConformanceTest, LoadLaneFindsAnOlderTtl) {
  const LaneKey key = Key("s1", "main");
  auto store = this->Open();
  for (int turn = 0; turn < 20; ++turn) {
    const std::string id = "r" + std::to_string(turn);
    std::vector<StoreWrite> unit = TurnUnit(
        key, id, kT0 + turn * kSecond, Classified(key, id, v1::VERDICT_OK));
    if (turn == 0) {
      std::get<UsageWrite>(unit[1]).normalized.set_cache_write_5m_tokens(2000);
    }
    ASSERT_TRUE(store->Write(std::move(unit)).ok());
  }
  LaneLookup lookup;
  lookup.since_us = kT0 - kSecond;
  absl::StatusOr<std::optional<RestoredLane>> lane =
      store->LoadLane(key, lookup);
  ASSERT_TRUE(lane.ok() && lane->has_value());
  EXPECT_EQ((*lane)->state.observed_ttl_seconds, 300u);
}

TYPED_TEST(StoreConformanceTest,
           LoadLaneGivesTheLanesLastClassifiedTurnWhateverItsAge) {
  const LaneKey main = Key("s1", "main");
  const LaneKey other = Key("s1", "other");
  auto store = this->Open();
  // A 1 h write long ago, a later classified turn, then one not classified
  // yet; another lane newer than all of them.
  std::vector<StoreWrite> r0 =
      TurnUnit(main, "r0", kT0 - 7200 * kSecond,
               Classified(main, "r0", v1::VERDICT_COLD_START));
  std::get<UsageWrite>(r0[1]).normalized.set_cache_write_1h_tokens(2000);
  ASSERT_TRUE(store->Write(std::move(r0)).ok());
  ASSERT_TRUE(store
                  ->Write(TurnUnit(main, "r1", kT0 - 3600 * kSecond,
                                   Classified(main, "r1", v1::VERDICT_OK)))
                  .ok());
  std::vector<StoreWrite> r2 =
      TurnUnit(main, "r2", kT0, Classified(main, "r2", v1::VERDICT_OK));
  r2.pop_back();
  ASSERT_TRUE(store->Write(std::move(r2)).ok());
  ASSERT_TRUE(store
                  ->Write(TurnUnit(other, "o0", kT0 + kSecond,
                                   Classified(other, "o0", v1::VERDICT_OK)))
                  .ok());

  absl::StatusOr<std::optional<RestoredLane>> lane =
      store->LoadLane(main, AnsweredOnly());
  ASSERT_TRUE(lane.ok()) << lane.status();
  ASSERT_TRUE(lane->has_value());
  const RestoredLane& restored = **lane;
  EXPECT_EQ(restored.key, main);
  EXPECT_EQ(restored.state.last_turn->request_id, "r1");
  EXPECT_EQ(restored.state.last_turn->request_time_us, kT0 - 3600 * kSecond);
  ASSERT_NE(restored.state.last_turn->snapshot, nullptr);
  EXPECT_TRUE(ProtoEquals(FullSnapshot(main, "r1", kT0 - 3600 * kSecond),
                          *restored.state.last_turn->snapshot));
  ASSERT_TRUE(restored.state.last_turn->usage.has_value());
  EXPECT_EQ(restored.state.observed_ttl_seconds, 3600u);

  // The same turn LoadRecentLanes gives for the lane.
  absl::StatusOr<std::vector<RestoredLane>> recent =
      store->LoadRecentLanes(kT0 - 4000 * kSecond);
  ASSERT_TRUE(recent.ok()) << recent.status();
  for (const RestoredLane& each : *recent) {
    if (each.key == main) {
      EXPECT_EQ(each.state.last_turn->request_id, "r1");
    }
  }
}

TYPED_TEST(StoreConformanceTest, LoadLaneOfALaneWithoutAClassifiedTurnIsEmpty) {
  const LaneKey main = Key("s1", "main");
  auto store = this->Open();
  absl::StatusOr<std::optional<RestoredLane>> unknown =
      store->LoadLane(Key("nobody", "main"), AnsweredOnly());
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_FALSE(unknown->has_value());

  std::vector<StoreWrite> pending =
      TurnUnit(main, "r0", kT0, Classified(main, "r0", v1::VERDICT_OK));
  pending.pop_back();
  ASSERT_TRUE(store->Write(std::move(pending)).ok());
  absl::StatusOr<std::optional<RestoredLane>> unclassified =
      store->LoadLane(main, AnsweredOnly());
  ASSERT_TRUE(unclassified.ok()) << unclassified.status();
  EXPECT_FALSE(unclassified->has_value());
}

TYPED_TEST(StoreConformanceTest, LoadLaneTreatsAnEmptyLaneAsMain) {
  const LaneKey main = Key("s1", "main");
  auto store = this->Open();
  ASSERT_TRUE(store
                  ->Write(TurnUnit(main, "r0", kT0,
                                   Classified(main, "r0", v1::VERDICT_OK)))
                  .ok());
  absl::StatusOr<std::optional<RestoredLane>> lane =
      store->LoadLane(Key("s1", ""), AnsweredOnly());
  ASSERT_TRUE(lane.ok()) << lane.status();
  ASSERT_TRUE(lane->has_value());
  EXPECT_EQ((*lane)->state.last_turn->request_id, "r0");
}

// A usage retried after a crash that the daemon would classify again (its
// ack lost, its commit not) must not turn a stored `ok` into a break, nor add
// a break row beside it.
TYPED_TEST(StoreConformanceTest, AStoredVerdictIsNeverRewritten) {
  auto store = this->Open();
  const LaneKey key = Key();
  ASSERT_TRUE(store->Write({Classified(key, "r1", v1::VERDICT_OK)}).ok());
  ASSERT_TRUE(store
                  ->Write({BreakWrite(
                      FullBreak(key, "r1", "r1", kT0, v1::REASON_UNKNOWN))})
                  .ok());
  absl::StatusOr<std::optional<v1::TurnClassification>> found =
      store->FindClassification(key, "r1");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->verdict(), v1::VERDICT_OK);
  EXPECT_EQ(this->Count("prompt_cache_breaks"), 0);
  // A pending turn still takes its final verdict, and its break.
  ASSERT_TRUE(store->Write({Classified(key, "r2", v1::VERDICT_PENDING)}).ok());
  ASSERT_TRUE(store->Write({BreakWrite(FullBreak(key, "r1", "r2", kT0))}).ok());
  found = store->FindClassification(key, "r2");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(this->Count("prompt_cache_breaks"), 1);
}

// The health probe answers OK on a store that can write, and writes
// nothing.
TYPED_TEST(StoreConformanceTest, ProbeWritableIsOkAndChangesNothing) {
  auto store = this->Open();
  WriteBrokenPair(*store, Key());
  EXPECT_TRUE(store->ProbeWritable().ok());
  EXPECT_TRUE(store->ProbeWritable().ok());
  EXPECT_EQ(this->Count("turns"), 2);
  EXPECT_EQ(this->Count("prompt_cache_breaks"), 1);
  EXPECT_EQ(store->stats().commits, 2);
}

TYPED_TEST(StoreConformanceTest, DeleteOlderThanRemovesOnlyOldRows) {
  auto store = this->Open();
  const LaneKey key = Key();
  // 2,500 old turns (more than one retention batch) with their own tool
  // list, 10 of them breaks; 5 new turns, 1 a break.
  std::vector<StoreWrite> old;
  for (int i = 0; i < 2500; ++i) {
    const std::string id = absl::StrCat("old", i);
    v1::Snapshot snapshot = FullSnapshot(key, id, kT0 + i);
    *snapshot.add_tools() = Tool("OldTool", 9);
    old.push_back(
        SnapshotWrite{key, std::make_shared<const v1::Snapshot>(snapshot)});
    if (i % 250 == 0) {
      old.push_back(BreakWrite(FullBreak(key, "prev", id, kT0 + i)));
    }
  }
  ASSERT_TRUE(store->Write(std::move(old)).ok());
  const int64_t cutoff = kT0 + 3600 * kSecond;
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("new", i);
    ASSERT_TRUE(store
                    ->Write(TurnUnit(
                        key, id, cutoff + i * kSecond,
                        i == 0 ? BreakWrite(FullBreak(key, "prev", id, cutoff))
                               : Classified(key, id, v1::VERDICT_OK)))
                    .ok());
  }
  ASSERT_EQ(this->Count("tool_lists"), 2);
  absl::StatusOr<int64_t> deleted = store->DeleteOlderThan(cutoff);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2500 + 10 + 1);  // Turns, breaks, the old tool list.
  EXPECT_EQ(this->Count("turns"), 5);
  EXPECT_EQ(this->Query("SELECT min(request_time_us) FROM turns"), cutoff);
  EXPECT_EQ(this->Count("prompt_cache_breaks"), 1);
  EXPECT_EQ(this->Count("tool_lists"), 1);
  EXPECT_EQ(this->Count("tool_list_entries"), 3);
  EXPECT_EQ(store->ListBreaks(v1::ListBreaksRequest())->breaks_size(), 1);
  deleted = store->DeleteOlderThan(cutoff);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
}

TYPED_TEST(StoreConformanceTest, ConcurrentWritersLoseNothing) {
  auto store = this->Open();
  constexpr int kThreads = 4;
  constexpr int kTurns = 50;
  EXPECT_EQ(WriteLanesConcurrently(*store, kThreads, kTurns), 0);
  EXPECT_EQ(this->Count("turns"), kThreads * kTurns);
  EXPECT_EQ(store->stats().committed_records, kThreads * kTurns * 3);
}

}  // namespace
}  // namespace cachewatch::testing
