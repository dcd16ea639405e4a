#include "daemon/core/lane_tracker.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::kSecond;
using ::cachewatch::testing::kT0;
using ::cachewatch::testing::Usage;
using ::cachewatch::testing::UsageRecord;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::shared_ptr<const v1::Snapshot> Shared(v1::Snapshot snapshot) {
  return std::make_shared<const v1::Snapshot>(std::move(snapshot));
}

std::vector<std::string> Ids(const std::vector<ClassifiedTurn>& turns) {
  std::vector<std::string> ids;
  for (const ClassifiedTurn& turn : turns) ids.push_back(turn.turn.request_id);
  return ids;
}

class LaneTrackerTest : public ::testing::Test {
 protected:
  // Daemon clock; independent of the client timestamps.
  int64_t now_ = 5 * kSecond;
  LaneTracker tracker_{TrackerOptions{}, ClassifierOptions{}};

  UsageResult Complete(const std::string& id, double seconds,
                       const v1::NormalizedUsage& usage) {
    return tracker_.AddUsage(UsageRecord(id, seconds + 2, usage), usage, now_);
  }
};

TEST_F(LaneTrackerTest, PairsSnapshotAndUsageAndDiffsConsecutiveTurns) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  UsageResult first = Complete("r1", 0, Usage(0, 20000, 10));
  EXPECT_EQ(first.classification.verdict(), v1::VERDICT_COLD_START);
  EXPECT_THAT(Ids(first.classified), ElementsAre("r1"));

  v1::Snapshot second = BaseSnapshot("r2", 30);
  second.mutable_tools()->SwapElements(0, 1);
  tracker_.AddSnapshot(Shared(second), now_);
  UsageResult result = Complete("r2", 30, Usage(0, 20000, 10));
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.classification.cache_break().primary_reason(),
            v1::REASON_TOOLS_ORDER_CHANGED);
  EXPECT_EQ(result.classification.cache_break().previous_request_id(), "r1");
  EXPECT_EQ(tracker_.lane_count(), 1u);
}

TEST_F(LaneTrackerTest, LanesAreIndependent) {
  v1::Snapshot main = BaseSnapshot("m1", 0);
  v1::Snapshot sub = BaseSnapshot("s1", 1);
  sub.set_lane("subagent-explore");
  sub.set_system_hash(999);
  tracker_.AddSnapshot(Shared(main), now_);
  tracker_.AddSnapshot(Shared(sub), now_);
  Complete("m1", 0, Usage(0, 20000, 0));
  v1::Usage sub_usage = UsageRecord("s1", 3, Usage(0, 20000, 0));
  sub_usage.set_lane("subagent-explore");
  // The subagent's first turn is a cold start, not a break against main.
  EXPECT_EQ(tracker_.AddUsage(sub_usage, sub_usage.normalized(), now_)
                .classification.verdict(),
            v1::VERDICT_COLD_START);
  EXPECT_EQ(tracker_.lane_count(), 2u);
}

TEST_F(LaneTrackerTest, RetriedRecordsAreDuplicates) {
  auto snapshot = Shared(BaseSnapshot("r1", 0));
  EXPECT_EQ(tracker_.AddSnapshot(snapshot, now_).outcome,
            RecordOutcome::kAccepted);
  EXPECT_EQ(tracker_.AddSnapshot(snapshot, now_).outcome,
            RecordOutcome::kDuplicate);
  EXPECT_EQ(Complete("r1", 0, Usage(0, 20000, 0)).outcome,
            RecordOutcome::kAccepted);
  UsageResult retry = Complete("r1", 0, Usage(0, 20000, 0));
  EXPECT_EQ(retry.outcome, RecordOutcome::kDuplicate);
  EXPECT_EQ(retry.classification.verdict(), v1::VERDICT_COLD_START);
  EXPECT_THAT(retry.classified, IsEmpty());
  EXPECT_EQ(tracker_.AddSnapshot(snapshot, now_).outcome,
            RecordOutcome::kDuplicate);
}

// A lane remembers its turns compactly (a request-id hash and the
// classification's fields); a retry must still get back exactly what the
// original got, break event included.
TEST_F(LaneTrackerTest, ARetryGetsExactlyTheOriginalClassification) {
  std::vector<v1::Snapshot> snapshots = {
      BaseSnapshot("r1", 0), BaseSnapshot("r2", 30), BaseSnapshot("r3", 60)};
  snapshots[1].mutable_tools()->SwapElements(0, 1);  // A break.
  snapshots[2].set_system_hash(77);                  // An announced drop.
  snapshots[2].set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
  std::vector<v1::TurnClassification> originals;
  for (int turn = 0; turn < 3; ++turn) {
    tracker_.AddSnapshot(Shared(snapshots[turn]), now_);
    originals.push_back(
        Complete(snapshots[turn].request_id(), 30.0 * turn, Usage(0, 20000, 10))
            .classification);
  }
  ASSERT_EQ(originals[0].verdict(), v1::VERDICT_COLD_START);
  ASSERT_EQ(originals[1].verdict(), v1::VERDICT_BREAK);
  ASSERT_TRUE(originals[1].has_cache_break());
  ASSERT_EQ(originals[2].verdict(), v1::VERDICT_EXPECTED_DROP);
  ASSERT_EQ(originals[2].expected_drop(), v1::EXPECTED_DROP_COMPACTION);
  for (int turn = 0; turn < 3; ++turn) {
    const UsageResult retry = Complete(snapshots[turn].request_id(),
                                       30.0 * turn, Usage(0, 20000, 10));
    EXPECT_EQ(retry.outcome, RecordOutcome::kDuplicate);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        retry.classification, originals[turn]))
        << "turn " << turn << ": " << retry.classification.DebugString()
        << " vs " << originals[turn].DebugString();
  }
  // A request id the lane never saw is not taken for one it did.
  tracker_.AddSnapshot(Shared(BaseSnapshot("r4", 90)), now_);
  EXPECT_EQ(Complete("r4", 90, Usage(20000, 0, 10)).outcome,
            RecordOutcome::kAccepted);
}

// Found by the lane_tracker fuzzer: r1's usage arrives last and releases r1
// and the three turns that waited behind it, more than the lane remembers.
// r1's answer is still r1's classification, not "pending".

// The lanes' hash (their tracker shard and map bucket) is XXH3-64 of
// "agent\x1fsession_id\x1flane": the values below are that, computed apart
// (a key of 256 bytes fills the hash's stack buffer, one of 307 does not).
TEST(LaneKeyHashTest, IsXxh3OfTheJoinedKey) {
  const LaneKeyHash hash;
  EXPECT_EQ(hash(LaneKey{"bench-agent", "session-1", "main"}),
            11769709891153800660ULL);
  EXPECT_EQ(hash(LaneKey{"", "s", "main"}), 16982797612586384412ULL);
  EXPECT_EQ(hash(LaneKey{std::string(250, 'a'), "sss", "m"}),
            16501843935835879780ULL);
  EXPECT_EQ(hash(LaneKey{std::string(300, 'a'), "s", "main"}),
            16076485361239970146ULL);
}
TEST(LaneTrackerReleaseTest, ALateUsageGetsItsOwnClassification) {
  TrackerOptions options;
  options.remembered_request_ids = 2;
  LaneTracker tracker(options, ClassifierOptions());
  const int64_t now = 5 * kSecond;
  tracker.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now);
  for (int turn = 2; turn <= 4; ++turn) {
    const std::string id = absl::StrCat("r", turn);
    tracker.AddSnapshot(Shared(BaseSnapshot(id, 30.0 * turn)), now);
    const v1::NormalizedUsage usage = Usage(20000, 0, 10);
    EXPECT_EQ(
        tracker.AddUsage(UsageRecord(id, 30.0 * turn + 2, usage), usage, now)
            .classification.verdict(),
        v1::VERDICT_PENDING);
  }
  const v1::NormalizedUsage usage = Usage(0, 20000, 10);
  const UsageResult late =
      tracker.AddUsage(UsageRecord("r1", 2, usage), usage, now);
  EXPECT_THAT(Ids(late.classified), ElementsAre("r1", "r2", "r3", "r4"));
  EXPECT_EQ(late.classification.verdict(), v1::VERDICT_COLD_START);
}

// Snapshots r1 (t=0) and r2 (t=30) are sent; r2's usage arrives first. r2
// must wait and then be diffed against r1, not against nothing.
TEST_F(LaneTrackerTest, OutOfOrderUsageIsDiffedAgainstTheRightTurn) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  v1::Snapshot second = BaseSnapshot("r2", 30);
  second.set_system_hash(7);
  tracker_.AddSnapshot(Shared(second), now_);
  UsageResult early = Complete("r2", 30, Usage(0, 20000, 0));
  EXPECT_EQ(early.classification.verdict(), v1::VERDICT_PENDING);
  EXPECT_THAT(early.classified, IsEmpty());

  UsageResult late = Complete("r1", 0, Usage(0, 20000, 0));
  EXPECT_EQ(late.classification.verdict(), v1::VERDICT_COLD_START);
  ASSERT_THAT(Ids(late.classified), ElementsAre("r1", "r2"));
  const v1::TurnClassification& second_result =
      late.classified[1].classification;
  ASSERT_EQ(second_result.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(second_result.cache_break().previous_request_id(), "r1");
  EXPECT_EQ(second_result.cache_break().primary_reason(),
            v1::REASON_SYSTEM_CHANGED);
  // A retry of r2 now gets its final classification.
  EXPECT_EQ(Complete("r2", 30, Usage(0, 20000, 0)).classification.verdict(),
            v1::VERDICT_BREAK);
}

// r2's usage overtakes its snapshot: it waits, pairs when the snapshot comes
// and is classified as if the records had come in order; r3 then has r2 as
// its baseline.
TEST_F(LaneTrackerTest, UsageThatOvertakesItsSnapshotWaitsAndPairs) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  UsageResult early = Complete("r2", 30, Usage(0, 20000, 0));
  EXPECT_EQ(early.classification.verdict(), v1::VERDICT_PENDING);
  EXPECT_THAT(early.classified, IsEmpty());
  now_ += 5 * kSecond;
  EXPECT_THAT(tracker_.Expire(now_), IsEmpty());

  v1::Snapshot second = BaseSnapshot("r2", 30);
  second.mutable_tools()->SwapElements(0, 1);
  const SnapshotResult paired = tracker_.AddSnapshot(Shared(second), now_);
  EXPECT_EQ(paired.outcome, RecordOutcome::kAccepted);
  ASSERT_THAT(Ids(paired.classified), ElementsAre("r2"));
  const v1::PromptCacheBreak& cache_break =
      paired.classified[0].classification.cache_break();
  EXPECT_EQ(cache_break.primary_reason(), v1::REASON_TOOLS_ORDER_CHANGED);
  EXPECT_EQ(cache_break.evidence(), v1::EVIDENCE_CLIENT_EXPLAINED);

  v1::Snapshot third = BaseSnapshot("r3", 60);
  third.mutable_tools()->SwapElements(0, 1);  // As r2 sent them.
  tracker_.AddSnapshot(Shared(third), now_);
  EXPECT_EQ(Complete("r3", 60, Usage(20000, 0, 0)).classification.verdict(),
            v1::VERDICT_OK);
}

// A turn behind a usage that waits for its snapshot waits too: released in
// client request order once the snapshot comes.
TEST_F(LaneTrackerTest, TurnsBehindAWaitingUsageWaitInOrder) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  Complete("r2", 30, Usage(20000, 0, 0));  // Its snapshot is late.
  v1::Snapshot third = BaseSnapshot("r3", 60);
  third.set_system_hash(7);
  tracker_.AddSnapshot(Shared(third), now_);
  EXPECT_EQ(Complete("r3", 60, Usage(0, 20000, 0)).classification.verdict(),
            v1::VERDICT_PENDING);
  const SnapshotResult paired =
      tracker_.AddSnapshot(Shared(BaseSnapshot("r2", 30)), now_);
  ASSERT_THAT(Ids(paired.classified), ElementsAre("r2", "r3"));
  EXPECT_EQ(paired.classified[0].classification.verdict(), v1::VERDICT_OK);
  EXPECT_EQ(paired.classified[1].classification.cache_break().primary_reason(),
            v1::REASON_SYSTEM_CHANGED);
  EXPECT_EQ(
      paired.classified[1].classification.cache_break().previous_request_id(),
      "r2");
}

// Only a snapshot that never comes leaves its turn without one: after the
// grace window (daemon clock) the break is classified with unknown evidence.
TEST_F(LaneTrackerTest, UsageWhoseSnapshotNeverComesIsUnknownAfterTheGrace) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  EXPECT_EQ(Complete("r2", 30, Usage(0, 20000, 0)).classification.verdict(),
            v1::VERDICT_PENDING);
  EXPECT_THAT(tracker_.Expire(now_ + 29 * kSecond), IsEmpty());
  const std::vector<ClassifiedTurn> released =
      tracker_.Expire(now_ + 30 * kSecond);
  ASSERT_THAT(Ids(released), ElementsAre("r2"));
  ASSERT_EQ(released[0].classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(released[0].classification.cache_break().evidence(),
            v1::EVIDENCE_UNKNOWN);
  EXPECT_EQ(released[0].classification.cache_break().primary_reason(),
            v1::REASON_UNKNOWN);
}

TEST(LaneTrackerGraceTest, TheGraceWindowIsConfigurable) {
  TrackerOptions options;
  options.usage_grace_us = 0;
  LaneTracker tracker(options, ClassifierOptions());
  const v1::NormalizedUsage usage = Usage(0, 20000, 0);
  EXPECT_EQ(tracker.AddUsage(UsageRecord("r1", 2, usage), usage, 0)
                .classification.verdict(),
            v1::VERDICT_COLD_START);
}

// r2's snapshot is lost but its usage shows the cache was read: r3, which
// adds a tool, is diffed against the last snapshot the lane saw (r1's) and
// gets its reason instead of unknown.
TEST_F(LaneTrackerTest, ALostSnapshotOfAnOkTurnKeepsTheLastKnownBaseline) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  Complete("r2", 30, Usage(20000, 0, 0));
  now_ += 31 * kSecond;
  const std::vector<ClassifiedTurn> released = tracker_.Expire(now_);
  ASSERT_THAT(Ids(released), ElementsAre("r2"));
  EXPECT_EQ(released[0].classification.verdict(), v1::VERDICT_OK);

  v1::Snapshot third = BaseSnapshot("r3", 60);
  v1::ToolRef* added = third.add_tools();
  added->set_name("zz_new_tool");
  added->set_schema_hash(42);
  tracker_.AddSnapshot(Shared(third), now_);
  const UsageResult result = Complete("r3", 60, Usage(0, 20000, 0));
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.classification.cache_break().primary_reason(),
            v1::REASON_TOOLS_ADDED);
  EXPECT_EQ(result.classification.cache_break().previous_request_id(), "r2");
}

// A snapshot later than the grace window cannot change its turn's verdict
// (a duplicate of a classified turn), but it becomes the lane's baseline:
// r3 is diffed against it (only its tool order changed).
TEST_F(LaneTrackerTest, ASnapshotLaterThanTheGraceStillBecomesTheBaseline) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  Complete("r2", 30, Usage(0, 20000, 0));
  now_ += 40 * kSecond;
  ASSERT_THAT(Ids(tracker_.Expire(now_)), ElementsAre("r2"));
  v1::Snapshot second = BaseSnapshot("r2", 30);
  second.set_system_hash(7);
  EXPECT_EQ(tracker_.AddSnapshot(Shared(second), now_).outcome,
            RecordOutcome::kDuplicate);
  v1::Snapshot third = BaseSnapshot("r3", 60);
  third.set_system_hash(7);
  third.mutable_tools()->SwapElements(0, 1);
  tracker_.AddSnapshot(Shared(third), now_);
  const UsageResult result = Complete("r3", 60, Usage(0, 20000, 0));
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_THAT(result.classification.cache_break().reasons(),
              ElementsAre(v1::REASON_TOOLS_ORDER_CHANGED));
}

// The provider's own word is read from the raw response the usage came in
// when the explicit field is not set, and stored beside ours on the break.
TEST_F(LaneTrackerTest, DiagnosticsInTheRawResponseReachTheBreak) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  v1::Snapshot second = BaseSnapshot("r2", 30);
  second.mutable_tools()->RemoveLast();
  tracker_.AddSnapshot(Shared(second), now_);
  const v1::NormalizedUsage usage = Usage(0, 20000, 0);
  v1::Usage record = UsageRecord("r2", 32, usage);
  record.set_raw_usage_json(
      R"({"usage":{"input_tokens":0},"diagnostics":{"cache_miss_reason":)"
      R"({"type":"tools_changed","cache_missed_input_tokens":18000}}})");
  const UsageResult result = tracker_.AddUsage(record, usage, now_);
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  const v1::PromptCacheBreak& cache_break = result.classification.cache_break();
  EXPECT_EQ(cache_break.primary_reason(), v1::REASON_TOOLS_REMOVED);
  EXPECT_EQ(cache_break.provider_miss_reason(), "tools_changed");
  EXPECT_EQ(cache_break.provider_missed_tokens(), 18000);
  EXPECT_EQ(cache_break.provider_agreement(), v1::PROVIDER_AGREEMENT_AGREE);
}

TEST_F(LaneTrackerTest, UnpairedSnapshotExpiresAndReleasesLaterTurns) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  tracker_.AddSnapshot(Shared(BaseSnapshot("lost", 10)), now_);  // No usage.
  tracker_.AddSnapshot(Shared(BaseSnapshot("r3", 20)), now_);
  EXPECT_EQ(Complete("r3", 20, Usage(20000, 0, 0)).classification.verdict(),
            v1::VERDICT_PENDING);
  EXPECT_THAT(tracker_.Expire(now_ + 60 * kSecond), IsEmpty());
  const std::vector<ClassifiedTurn> released =
      tracker_.Expire(now_ + 601 * kSecond);
  ASSERT_THAT(Ids(released), ElementsAre("r3"));
  EXPECT_EQ(released[0].classification.verdict(), v1::VERDICT_OK);
}

TEST_F(LaneTrackerTest, AbortedPreviousHintReleasesWaitingTurnsAtOnce) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  tracker_.AddSnapshot(Shared(BaseSnapshot("aborted", 10)), now_);
  v1::Snapshot retry = BaseSnapshot("r3", 20);
  retry.set_expected_drop(v1::EXPECTED_DROP_ABORTED_PREVIOUS);
  tracker_.AddSnapshot(Shared(retry), now_);
  EXPECT_EQ(Complete("r3", 20, Usage(0, 20000, 0)).classification.verdict(),
            v1::VERDICT_EXPECTED_DROP);
}

TEST_F(LaneTrackerTest, IdleLanesAreForgotten) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  Complete("r1", 0, Usage(0, 20000, 0));
  tracker_.Expire(now_ + 3600 * kSecond);
  EXPECT_EQ(tracker_.lane_count(), 1u);
  tracker_.Expire(now_ + 7200 * kSecond);
  EXPECT_EQ(tracker_.lane_count(), 0u);
}

TEST(LaneTrackerBoundTest, LeastRecentlyUsedLaneIsForgottenAtTheCap) {
  TrackerOptions options;
  options.max_lanes = 2;
  LaneTracker tracker(options, {});
  for (const char* session : {"a", "b", "a", "c"}) {
    v1::Snapshot snapshot = BaseSnapshot(std::string("r-") + session, 0);
    snapshot.set_session_id(session);
    tracker.AddSnapshot(Shared(snapshot), 0);
  }
  EXPECT_EQ(tracker.lane_count(), 2u);
  // "b" was least recently used: its lane is gone, so its usage starts a
  // fresh lane (evicting "a") and pairs with nothing.
  v1::Usage usage = UsageRecord("r-b", 1, Usage(0, 5000, 0));
  usage.set_session_id("b");
  tracker.AddUsage(usage, usage.normalized(), 0);
  const std::vector<ClassifiedTurn> released =
      tracker.Expire(options.usage_grace_us);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].classification.verdict(), v1::VERDICT_COLD_START);
  EXPECT_EQ(tracker.lane_count(), 2u);
}

// A lane whose record is not durable yet is not evicted at the cap: its
// usage still pairs with the snapshot memory holds. Once unpinned, the
// lanes pins kept above the cap are evicted down to it.
TEST(LaneTrackerBoundTest, PinnedLanesAreNotEvictedAtTheCap) {
  TrackerOptions options;
  options.max_lanes = 2;
  LaneTracker tracker(options, {});
  const auto key = [](const char* session) {
    return LaneKey{"agent", session, "main"};
  };
  std::map<std::string, uint32_t> pins;
  for (const char* session : {"a", "b", "c"}) {
    v1::Snapshot snapshot = BaseSnapshot(std::string("r-") + session, 0);
    snapshot.set_session_id(session);
    ASSERT_EQ(LaneKeyOf(snapshot), key(session));
    tracker.AddSnapshot(Shared(snapshot), 0);
    pins[session] = tracker.Pin(key(session));
  }
  EXPECT_EQ(tracker.lane_count(), 3u);  // Every lane pinned: none evicted.
  v1::Usage usage = UsageRecord("r-a", 1, Usage(0, 5000, 0));
  usage.set_session_id("a");
  const UsageResult paired = tracker.AddUsage(usage, usage.normalized(), 0);
  EXPECT_EQ(paired.classification.verdict(), v1::VERDICT_COLD_START)
      << "the usage did not find its snapshot";
  ASSERT_EQ(paired.classified.size(), 1u);
  EXPECT_NE(paired.classified[0].turn.snapshot, nullptr);

  tracker.Unpin(key("b"), pins["b"]);  // "b": unpinned, least recently used.
  EXPECT_EQ(tracker.lane_count(), 2u);
  EXPECT_FALSE(tracker.HasLane(key("b")));
  tracker.Unpin(key("a"), pins["a"]);
  tracker.Unpin(key("c"), pins["c"]);
  EXPECT_EQ(tracker.lane_count(), 2u);
}

TEST(LaneTrackerBoundTest, AnOlderPinDoesNotUnpinTheLaneHeldAgain) {
  TrackerOptions options;
  options.max_lanes = 1;
  LaneTracker tracker(options, {});
  const LaneKey a{"agent", "a", "main"};
  const LaneKey b{"agent", "b", "main"};
  const auto add = [&tracker](const char* session, const char* request_id) {
    v1::Snapshot snapshot = BaseSnapshot(request_id, 0);
    snapshot.set_session_id(session);
    tracker.AddSnapshot(Shared(snapshot), 0);
  };
  EXPECT_EQ(tracker.Pin(a), 0u);  // Not held: nothing pinned.
  add("a", "r1");
  const uint32_t first = tracker.Pin(a);
  EXPECT_NE(first, 0u);
  tracker.Drop(a);  // Stale: forgotten while r1's commit is in flight...
  add("a", "r2");   // ...and held again for the next record.
  const uint32_t second = tracker.Pin(a);
  EXPECT_NE(second, first);
  tracker.Unpin(a, first);  // r1's commit ends: r2 still pins the lane.
  add("b", "r3");
  EXPECT_TRUE(tracker.HasLane(a)) << "r2's pin was ended by r1's";
  EXPECT_EQ(tracker.lane_count(), 2u);
  tracker.Unpin(a, second);  // Now the cap applies: "a" is the older.
  EXPECT_FALSE(tracker.HasLane(a));
  EXPECT_TRUE(tracker.HasLane(b));
}

TEST_F(LaneTrackerTest, PendingTurnsPerLaneAreBounded) {
  TrackerOptions options;
  options.max_pending_per_lane = 3;
  LaneTracker tracker(options, {});
  for (int i = 0; i < 10; ++i) {
    tracker.AddSnapshot(Shared(BaseSnapshot(absl::StrCat("r", i), i)), now_);
  }
  // Only the last three snapshots are still waiting: r9's usage is
  // classified once r7 and r8 are given up or complete.
  // r0 was given up: an orphan usage, which at the lane's bound does not
  // wait for its snapshot either.
  v1::Usage usage = UsageRecord("r0", 1, Usage(0, 5000, 0));
  EXPECT_EQ(tracker.AddUsage(usage, usage.normalized(), now_)
                .classification.verdict(),
            v1::VERDICT_COLD_START);
}

TEST_F(LaneTrackerTest, RestoredLaneDiffsItsNextTurnAgainstTheRestoredOne) {
  Turn last =
      testing::MakeTurn(BaseSnapshot("before-restart", 0), Usage(0, 20000, 0));
  LaneState state;
  state.last_turn = last;
  tracker_.Restore({"agent", "s1", "main"}, std::move(state), now_);
  v1::Snapshot next = BaseSnapshot("after-restart", 20);
  next.set_model("claude-opus-4-1");
  tracker_.AddSnapshot(Shared(next), now_);
  UsageResult result = Complete("after-restart", 20, Usage(0, 20000, 0));
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.classification.cache_break().previous_request_id(),
            "before-restart");
  EXPECT_EQ(result.classification.cache_break().primary_reason(),
            v1::REASON_MODEL_CHANGED);
}

TEST_F(LaneTrackerTest, ObservedOneHourWritesSetTheLaneTtl) {
  tracker_.AddSnapshot(Shared(BaseSnapshot("r1", 0)), now_);
  v1::NormalizedUsage one_hour = Usage(0, 20000, 0);
  one_hour.set_cache_write_1h_tokens(20000);
  Complete("r1", 0, one_hour);
  tracker_.AddSnapshot(Shared(BaseSnapshot("r2", 1200)), now_);
  const v1::PromptCacheBreak event =
      Complete("r2", 1200, Usage(0, 20000, 0)).classification.cache_break();
  EXPECT_EQ(event.ttl_seconds(), 3600u);
  EXPECT_EQ(event.primary_reason(), v1::REASON_LIKELY_PROVIDER_EVICTION);
}

}  // namespace
}  // namespace cachewatch
