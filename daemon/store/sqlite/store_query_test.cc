// SqliteStore queries: ListBreaks filters and paging, lane timelines, stored
// classifications, lane state after a restart, and retention. Every test
// uses a real SQLite file in a fresh directory.
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/store/sqlite/store_test_util.h"

namespace cachewatch::testing {
namespace {

// Stores `event` as the classification of a turn with no snapshot or usage.
void WriteBreak(SqliteStore& store, const v1::PromptCacheBreak& event) {
  ASSERT_TRUE(store.Write({BreakWrite(event)}).ok());
}

std::vector<std::string> BreakIds(const v1::ListBreaksResponse& response) {
  std::vector<std::string> ids;
  for (const v1::PromptCacheBreak& event : response.breaks()) {
    ids.push_back(event.request_id());
  }
  return ids;
}

class ListBreaksFilterTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenStore();
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
          FullBreak(row.key, "prev", row.request_id,
                    kT0 + row.seconds * kSecond, row.reason);
      event.set_model(row.model);
      WriteBreak(*store_, event);
    }
  }

  std::vector<std::string> List(const v1::ListBreaksRequest& request) {
    absl::StatusOr<v1::ListBreaksResponse> response =
        store_->ListBreaks(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? BreakIds(*response) : std::vector<std::string>{};
  }

  std::unique_ptr<SqliteStore> store_;
};

TEST_F(ListBreaksFilterTest, FiltersCombineWithAnd) {
  using Ids = std::vector<std::string>;
  v1::ListBreaksRequest request;
  EXPECT_EQ(List(request), (Ids{"b5", "b4", "b3", "b2", "b1"}));

  request.set_agent("a1");
  EXPECT_EQ(List(request), (Ids{"b4", "b3", "b2", "b1"}));
  request.set_session_id("s1");
  EXPECT_EQ(List(request), (Ids{"b3", "b2", "b1"}));
  request.set_lane("main");
  EXPECT_EQ(List(request), (Ids{"b2", "b1"}));
  request.set_model("m1");
  EXPECT_EQ(List(request), (Ids{"b1"}));

  request.Clear();
  request.set_reason(v1::REASON_TTL_EXPIRED);
  EXPECT_EQ(List(request), (Ids{"b5", "b3", "b1"}));
  *request.mutable_since() = Time(kT0 + 30 * kSecond);
  EXPECT_EQ(List(request), (Ids{"b5", "b3"}));
  *request.mutable_until() = Time(kT0 + 50 * kSecond);
  EXPECT_EQ(List(request), (Ids{"b3"}));
  request.set_model("m2");
  EXPECT_EQ(List(request), Ids{});
}

TEST_F(StoreTest, ListBreaksPagesWithoutGapsOrDuplicates) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, ListBreaksRejectsBadPageTokensAndSizes) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, LaneTimelineReturnsTheMostRecentTurnsOldestFirst) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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
  EXPECT_TRUE(ProtoEquals(Normalized(40000, 2000, 500), last.usage()));
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

TEST_F(StoreTest, FindClassificationAnswersRetriesFromTheStore) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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

// A lookup of every classified turn ever stored, and of no waiting one.
LaneLookup AnsweredOnly() {
  LaneLookup lookup;
  lookup.since_us = 0;
  lookup.waiting_since_us = std::numeric_limits<int64_t>::max();
  return lookup;
}

// A lane the tracker forgot: its baseline, its newest answers (a break's
// event included) and its waiting snapshot, from one lookup; a snapshot
// given up long ago stays given up; a lane never seen is nullopt.
TEST_F(StoreTest, LoadLaneGivesTheLanesState) {
  const LaneKey key = Key("s1", "main");
  std::unique_ptr<SqliteStore> store = OpenStore();
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
TEST_F(StoreTest, LoadLaneFindsAnOlderTtl) {
  const LaneKey key = Key("s1", "main");
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, LoadRecentLanesAfterRestart) {
  const LaneKey main = Key("s1", "main");
  const LaneKey sub = Key("s1", "sub");
  const LaneKey old = Key("s2", "main");
  {
    std::unique_ptr<SqliteStore> store = OpenStore();
    // main: a 1 h write, then a turn without a write split, then one not
    // classified yet.
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
    // sub: one classified turn with a 5 m write.
    std::vector<StoreWrite> s0 = TurnUnit(
        sub, "s0", kT0 + 5 * kSecond, Classified(sub, "s0", v1::VERDICT_OK));
    std::get<UsageWrite>(s0[1]).normalized.set_cache_write_5m_tokens(2000);
    ASSERT_TRUE(store->Write(std::move(s0)).ok());
    // old: last classified before `since`.
    ASSERT_TRUE(store
                    ->Write(TurnUnit(old, "o0", kT0 - 3600 * kSecond,
                                     Classified(old, "o0", v1::VERDICT_OK)))
                    .ok());
  }

  std::unique_ptr<SqliteStore> store = OpenStore();
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
  EXPECT_TRUE(ProtoEquals(Normalized(40000, 2000, 500), *turn.usage));
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

TEST_F(StoreTest, LoadLaneGivesTheLanesLastClassifiedTurnWhateverItsAge) {
  const LaneKey main = Key("s1", "main");
  const LaneKey other = Key("s1", "other");
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, LoadLaneOfALaneWithoutAClassifiedTurnIsEmpty) {
  const LaneKey main = Key("s1", "main");
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, LoadLaneTreatsAnEmptyLaneAsMain) {
  const LaneKey main = Key("s1", "main");
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, DeleteOlderThanRemovesOnlyOldRows) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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
  ASSERT_EQ(CountRows("tool_lists"), 2);

  absl::StatusOr<int64_t> deleted = store->DeleteOlderThan(cutoff);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2500 + 10 + 1);  // Turns, breaks, the old tool list.
  EXPECT_EQ(CountRows("turns"), 5);
  EXPECT_EQ(QueryInt("SELECT min(request_time_us) FROM turns"), cutoff);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
  EXPECT_EQ(CountRows("tool_lists"), 1);
  EXPECT_EQ(CountRows("tool_list_entries"), 3);
  EXPECT_EQ(store->ListBreaks(v1::ListBreaksRequest())->breaks_size(), 1);

  deleted = store->DeleteOlderThan(cutoff);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
}

}  // namespace
}  // namespace cachewatch::testing
