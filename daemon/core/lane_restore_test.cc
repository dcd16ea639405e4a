// A lane the tracker no longer holds (idle, the lane cap, a restart) is
// restored from its stored state (LaneState) and resumes exactly where it
// was: its next turn is diffed against its real previous turn, a retry of
// what it answered is a duplicate with the original verdict, and its waiting
// turns wait on.
#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/core/lane_tracker.h"
#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::kSecond;
using ::cachewatch::testing::kT0;
using ::cachewatch::testing::MakeTurn;
using ::cachewatch::testing::Usage;
using ::cachewatch::testing::UsageRecord;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::IsEmpty;

const LaneKey kLane{"agent", "s1", "main"};

std::shared_ptr<const v1::Snapshot> Shared(v1::Snapshot snapshot) {
  return std::make_shared<const v1::Snapshot>(std::move(snapshot));
}

LaneState State(Turn last, std::vector<AnsweredTurn> answered = {},
                std::vector<WaitingTurn> waiting = {}) {
  LaneState state;
  state.last_turn = std::move(last);
  state.answered = std::move(answered);
  state.waiting = std::move(waiting);
  return state;
}

class LaneRestoreTest : public ::testing::Test {
 protected:
  int64_t now_ = 5 * kSecond;  // Daemon clock.
  LaneTracker tracker_{TrackerOptions{}, ClassifierOptions{}};

  UsageResult Complete(LaneTracker& tracker, const std::string& id,
                       double seconds, const v1::NormalizedUsage& usage) {
    return tracker.AddUsage(UsageRecord(id, seconds + 2, usage), usage, now_);
  }
  UsageResult Complete(const std::string& id, double seconds,
                       const v1::NormalizedUsage& usage) {
    return Complete(tracker_, id, seconds, usage);
  }
  v1::TurnClassification Play(const std::string& id, double seconds,
                              const v1::NormalizedUsage& usage) {
    tracker_.AddSnapshot(Shared(BaseSnapshot(id, seconds)), now_);
    return Complete(id, seconds, usage).classification;
  }
};

TEST_F(LaneRestoreTest, AForgottenLaneIsNotHeld) {
  Play("r1", 0, Usage(0, 20000, 0));
  EXPECT_TRUE(tracker_.HasLane(kLane));
  tracker_.Expire(now_ + 7200 * kSecond);
  EXPECT_FALSE(tracker_.HasLane(kLane));
}

// After a lunch break the lane is gone from memory; restored with its last
// turn, the next turn's full re-write is the TTL expiry it is, measured over
// the real gap, not a cold start.
TEST_F(LaneRestoreTest, ARestoredLaneIsDiffedOverTheRealGap) {
  tracker_.Restore(kLane,
                   State(MakeTurn(BaseSnapshot("r1", 0), Usage(20000, 100, 10)),
                         {{"r1", {}}}),
                   now_);
  const v1::TurnClassification next = Play("r2", 3 * 3600, Usage(0, 20100, 10));
  ASSERT_EQ(next.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(next.cache_break().primary_reason(), v1::REASON_TTL_EXPIRED);
  EXPECT_EQ(next.cache_break().previous_request_id(), "r1");
  EXPECT_DOUBLE_EQ(next.cache_break().gap_seconds(), 3 * 3600);
}

// The usage was committed, its ack lost in a crash; its retry after the
// restart is the duplicate it is, with its stored verdict, not a turn
// classified against itself.
TEST_F(LaneRestoreTest, ARetryOfAnAnsweredUsageGetsItsStoredVerdict) {
  Play("r1", 0, Usage(0, 20000, 0));
  const v1::TurnClassification original = Play("r2", 30, Usage(20000, 0, 0));
  ASSERT_EQ(original.verdict(), v1::VERDICT_OK);

  LaneTracker restarted(TrackerOptions{}, ClassifierOptions{});
  restarted.Restore(kLane,
                    State(MakeTurn(BaseSnapshot("r2", 30), Usage(20000, 0, 0)),
                          {{"r2", original}}),
                    now_);
  const UsageResult retry = Complete(restarted, "r2", 30, Usage(20000, 0, 0));
  EXPECT_EQ(retry.outcome, RecordOutcome::kDuplicate);
  EXPECT_TRUE(MessageDifferencer::Equals(retry.classification, original))
      << retry.classification.DebugString();
  EXPECT_THAT(retry.classified, IsEmpty());
  EXPECT_EQ(restarted.AddSnapshot(Shared(BaseSnapshot("r2", 30)), now_).outcome,
            RecordOutcome::kDuplicate);
}

// Acknowledged before the restart, the snapshot is a waiting turn: its
// usage after the restart pairs with it and gets its real reason; a retry
// of the snapshot is a duplicate, not a second turn ahead of the next one.
TEST_F(LaneRestoreTest, AWaitingSnapshotPairsWithItsUsageAfterRestore) {
  v1::Snapshot switched = BaseSnapshot("r2", 30);
  switched.set_model("claude-opus-4-1");
  Turn waiting_turn = MakeTurn(switched, Usage(0, 0, 0));
  waiting_turn.usage.reset();
  tracker_.Restore(kLane,
                   State(MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0)),
                         {{"r1", {}}}, {{waiting_turn, now_ - 10 * kSecond}}),
                   now_);
  EXPECT_EQ(tracker_.AddSnapshot(Shared(switched), now_).outcome,
            RecordOutcome::kDuplicate);
  const UsageResult result = Complete("r2", 30, Usage(0, 20000, 0));
  ASSERT_EQ(result.classification.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(result.classification.cache_break().primary_reason(),
            v1::REASON_MODEL_CHANGED);
  EXPECT_EQ(result.classification.cache_break().previous_request_id(), "r1");
  EXPECT_THAT(result.classified, ::testing::SizeIs(1));
}

// A restored waiting snapshot keeps the pending timeout it had: it is given
// up 600 s after it was received, not 600 s after the restore.
TEST_F(LaneRestoreTest, AWaitingSnapshotTimesOutFromWhenItWasReceived) {
  Turn lost = MakeTurn(BaseSnapshot("lost", 10), Usage(0, 0, 0));
  lost.usage.reset();
  Turn behind = MakeTurn(BaseSnapshot("r3", 20), Usage(20000, 0, 0));
  tracker_.Restore(
      kLane,
      State(MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0)), {},
            {{behind, now_ - 590 * kSecond}, {lost, now_ - 595 * kSecond}}),
      now_);
  const std::vector<ClassifiedTurn> released =
      tracker_.Expire(now_ + 6 * kSecond);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].turn.request_id, "r3");
  EXPECT_EQ(released[0].classification.verdict(), v1::VERDICT_OK);
}

// A lane forgotten for longer than the pending timeout: its unpaired
// snapshot was given up long ago, and does not hold up the lane's next turn.
TEST_F(LaneRestoreTest, AWaitingSnapshotPastItsTimeoutIsGivenUpOnRestore) {
  Turn lost = MakeTurn(BaseSnapshot("lost", 10), Usage(0, 0, 0));
  lost.usage.reset();
  tracker_.Restore(kLane,
                   State(MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0)),
                         {}, {{lost, now_ - 3 * 3600 * kSecond}}),
                   now_);
  EXPECT_EQ(Play("r3", 3 * 3600, Usage(0, 20000, 0)).verdict(),
            v1::VERDICT_BREAK);
}

// A classification whose write was lost (e.g. turns released by an expiry
// whose store write failed) is made again on restore, and handed back.
TEST_F(LaneRestoreTest, RestoreReleasesCompleteWaitingTurns) {
  const std::vector<ClassifiedTurn> released = tracker_.Restore(
      kLane,
      State(MakeTurn(BaseSnapshot("r1", 0), Usage(0, 20000, 0)), {},
            {{MakeTurn(BaseSnapshot("r2", 30), Usage(20000, 0, 0)), now_}}),
      now_);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].turn.request_id, "r2");
  EXPECT_EQ(released[0].classification.verdict(), v1::VERDICT_OK);
}

// What the tracker holds is newer than what the store gave: a restore that
// lost the race with the lane's own records changes nothing.
TEST_F(LaneRestoreTest, RestoreLeavesAHeldLaneAsItIs) {
  Play("r1", 0, Usage(0, 20000, 0));
  EXPECT_THAT(
      tracker_.Restore(
          kLane, State(MakeTurn(BaseSnapshot("old", -60), Usage(0, 20000, 0))),
          now_),
      IsEmpty());
  const v1::TurnClassification next = Play("r2", 30, Usage(20000, 0, 0));
  EXPECT_EQ(next.verdict(), v1::VERDICT_OK);
  EXPECT_EQ(tracker_.lane_count(), 1u);
}

// Only the newest remembered_request_ids answers are kept.
TEST_F(LaneRestoreTest, RestoreKeepsTheNewestAnswers) {
  TrackerOptions options;
  options.remembered_request_ids = 2;
  LaneTracker tracker(options, ClassifierOptions{});
  v1::TurnClassification ok;
  ok.set_verdict(v1::VERDICT_OK);
  tracker.Restore(kLane,
                  State(MakeTurn(BaseSnapshot("r3", 60), Usage(20000, 0, 0)),
                        {{"r1", ok}, {"r2", ok}, {"r3", ok}}),
                  now_);
  EXPECT_EQ(Complete(tracker, "r3", 60, Usage(20000, 0, 0)).outcome,
            RecordOutcome::kDuplicate);
  EXPECT_EQ(Complete(tracker, "r2", 30, Usage(20000, 0, 0)).outcome,
            RecordOutcome::kDuplicate);
  EXPECT_TRUE(tracker.MayHaveForgotten(kLane, "r1", kT0 + 2 * kSecond));
}

// A retry of a turn older than everything the lane remembers can only be
// told from a new turn by the store; a record in order never needs it.
TEST_F(LaneRestoreTest, OnlyARecordOlderThanTheBaselineMayHaveBeenForgotten) {
  TrackerOptions options;
  options.remembered_request_ids = 2;
  LaneTracker tracker(options, ClassifierOptions{});
  EXPECT_FALSE(tracker.MayHaveForgotten(kLane, "r1", kT0));  // Not held.
  for (int turn = 0; turn < 3; ++turn) {
    const std::string id = "r" + std::to_string(turn);
    tracker.AddSnapshot(Shared(BaseSnapshot(id, 30.0 * turn)), now_);
    Complete(tracker, id, 30.0 * turn, Usage(0, 20000, 0));
  }
  // r0 is no longer remembered; its retried usage came before r2.
  EXPECT_TRUE(tracker.MayHaveForgotten(kLane, "r0", kT0 + 2 * kSecond));
  EXPECT_FALSE(tracker.MayHaveForgotten(kLane, "r2", kT0 + 62 * kSecond));
  EXPECT_FALSE(tracker.MayHaveForgotten(kLane, "r3", kT0 + 92 * kSecond));
  tracker.AddSnapshot(Shared(BaseSnapshot("r3", 50)), now_);  // Waiting.
  EXPECT_FALSE(tracker.MayHaveForgotten(kLane, "r3", kT0 + 52 * kSecond));
}

// A lane with fewer turns than it remembers has forgotten none.
TEST_F(LaneRestoreTest, AYoungLaneHasForgottenNothing) {
  Play("r1", 0, Usage(0, 20000, 0));
  Play("r2", 30, Usage(20000, 0, 0));
  EXPECT_FALSE(tracker_.MayHaveForgotten(kLane, "other", kT0));
  EXPECT_THAT(tracker_.Expire(now_), IsEmpty());
}

}  // namespace
}  // namespace cachewatch
