// RestoreLaneState: which of a lane's stored turns its restored state keeps
// (waiting, answered, the baseline and its snapshot, the observed TTL), read
// from a history of plain rows, newest first.
#include "daemon/core/lane_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::kSecond;
using ::cachewatch::testing::kT0;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A stored turn at kT0 + seconds: with a snapshot unless `snapshot` is
// false, classified with `verdict` unless it is VERDICT_UNSPECIFIED.
struct Row {
  std::string id;
  double seconds = 0;
  v1::Verdict verdict = v1::VERDICT_OK;
  bool snapshot = true;
  int64_t write_5m = 0;
  int64_t write_1h = 0;
};

// A LaneHistory over rows given newest first, counting what it is asked.
class FakeHistory : public LaneHistory {
 public:
  explicit FakeHistory(std::vector<Row> rows) {
    for (const Row& row : rows) {
      Turn turn;
      turn.request_id = row.id;
      turn.request_time_us = kT0 + static_cast<int64_t>(row.seconds * kSecond);
      v1::NormalizedUsage usage;
      usage.set_cache_write_5m_tokens(row.write_5m);
      usage.set_cache_write_1h_tokens(row.write_1h);
      usage.set_cache_write_tokens(row.write_5m + row.write_1h);
      turn.usage = usage;
      turns_.push_back(turn);
      StoredTurn stored{.request_id = row.id,
                        .request_time_us = turn.request_time_us,
                        .has_snapshot = row.snapshot,
                        .cache_write_5m_tokens = row.write_5m,
                        .cache_write_1h_tokens = row.write_1h,
                        .classification = std::nullopt,
                        .received_us = turn.request_time_us + 1};
      if (row.verdict != v1::VERDICT_UNSPECIFIED) {
        v1::TurnClassification classification;
        classification.set_verdict(row.verdict);
        classification.set_expected_reuse_tokens(1000);
        classification.set_missed_tokens(row.verdict == v1::VERDICT_BREAK ? 900
                                                                          : 0);
        if (row.verdict == v1::VERDICT_BREAK) {
          classification.mutable_cache_break()->set_break_id(
              absl::StrCat("b-", row.id));
        }
        if (row.verdict == v1::VERDICT_EXPECTED_DROP) {
          classification.set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
        }
        stored.classification = classification;
      }
      rows_.push_back(std::move(stored));
    }
  }

  absl::StatusOr<StoredTurn*> Next() override {
    if (fail_next_at_ == read_) return absl::DataLossError("bad row");
    if (read_ == rows_.size()) return nullptr;
    current_ = rows_[read_++];
    return &current_;
  }

  absl::StatusOr<Turn> FullTurn() override {
    turns_asked_.push_back(rows_[read_ - 1].request_id);
    return turns_[read_ - 1];
  }

  absl::StatusOr<std::shared_ptr<const v1::Snapshot>> Snapshot() override {
    const std::string& id = rows_[read_ - 1].request_id;
    snapshots_asked_.push_back(id);
    if (fail_snapshots_) return absl::DataLossError("bad snapshot");
    return std::make_shared<const v1::Snapshot>(BaseSnapshot(id, 0));
  }

  absl::StatusOr<uint32_t> EarlierObservedTtl() override {
    ++earlier_ttl_asked_;
    return earlier_ttl_;
  }

  size_t read() const { return read_; }
  const std::vector<std::string>& snapshots_asked() const {
    return snapshots_asked_;
  }
  const std::vector<std::string>& turns_asked() const { return turns_asked_; }
  int earlier_ttl_asked() const { return earlier_ttl_asked_; }
  void set_earlier_ttl(uint32_t ttl) { earlier_ttl_ = ttl; }
  void fail_next_at(size_t row) { fail_next_at_ = row; }
  void fail_snapshots() { fail_snapshots_ = true; }

 private:
  std::vector<StoredTurn> rows_;
  std::vector<Turn> turns_;
  StoredTurn current_;
  size_t read_ = 0;
  std::vector<std::string> snapshots_asked_;
  std::vector<std::string> turns_asked_;
  int earlier_ttl_asked_ = 0;
  uint32_t earlier_ttl_ = 0;
  size_t fail_next_at_ = static_cast<size_t>(-1);
  bool fail_snapshots_ = false;
};

constexpr v1::Verdict kUnclassified = v1::VERDICT_UNSPECIFIED;
constexpr LaneLimits kLimits{/*answered=*/16, /*waiting=*/64};

LaneState Restore(FakeHistory& history, LaneLimits limits = kLimits) {
  absl::StatusOr<std::optional<LaneState>> state =
      RestoreLaneState(history, limits);
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok() || !state->has_value()) return {};
  return **state;
}

std::vector<std::string> AnsweredIds(const LaneState& state) {
  std::vector<std::string> ids;
  for (const AnsweredTurn& turn : state.answered)
    ids.push_back(turn.request_id);
  return ids;
}

std::vector<std::string> WaitingIds(const LaneState& state) {
  std::vector<std::string> ids;
  for (const WaitingTurn& turn : state.waiting) {
    ids.push_back(turn.turn.request_id);
  }
  return ids;
}

TEST(LaneHistoryTest, AnEmptyLaneIsNotFound) {
  FakeHistory history({});
  absl::StatusOr<std::optional<LaneState>> state =
      RestoreLaneState(history, kLimits);
  ASSERT_TRUE(state.ok());
  EXPECT_FALSE(state->has_value());
  EXPECT_EQ(history.earlier_ttl_asked(), 0);
}

TEST(LaneHistoryTest, UnclassifiedTurnsWaitWithTheirSnapshots) {
  FakeHistory history({{"r4", 40, kUnclassified},
                       {"r3", 30, kUnclassified, /*snapshot=*/false},
                       {"r2", 20},
                       {"r1", 10}});
  const LaneState state = Restore(history);
  EXPECT_THAT(WaitingIds(state), ElementsAre("r4", "r3"));
  ASSERT_NE(state.waiting[0].turn.snapshot, nullptr);
  EXPECT_EQ(state.waiting[0].turn.snapshot->request_id(), "r4");
  EXPECT_EQ(state.waiting[1].turn.snapshot, nullptr);
  EXPECT_EQ(state.waiting[0].received_us, kT0 + 40 * kSecond + 1);
  EXPECT_THAT(AnsweredIds(state), ElementsAre("r1", "r2"));
  ASSERT_TRUE(state.last_turn.has_value());
  EXPECT_EQ(state.last_turn->request_id, "r2");
}

TEST(LaneHistoryTest, AtMostTheNewestWaitingTurnsAreKept) {
  FakeHistory history({{"r4", 40, kUnclassified},
                       {"r3", 30, kUnclassified},
                       {"r2", 20, kUnclassified},
                       {"r1", 10}});
  const LaneState state = Restore(history, {/*answered=*/16, /*waiting=*/2});
  EXPECT_THAT(WaitingIds(state), ElementsAre("r4", "r3"));
  // The turns past the limit are read on: the baseline is older.
  EXPECT_THAT(AnsweredIds(state), ElementsAre("r1"));
  // r2 was left out without decoding it.
  EXPECT_THAT(history.snapshots_asked(), ElementsAre("r4", "r3", "r1"));
  EXPECT_THAT(history.turns_asked(), ElementsAre("r4", "r3", "r1"));
}

TEST(LaneHistoryTest, TheReadStopsPastTheAnsweredLimit) {
  FakeHistory history({{"r5", 50},
                       {"r4", 40},
                       {"r3", 30},
                       {"r2", 20, kUnclassified},
                       {"r1", 10}});
  const LaneState state = Restore(history, {/*answered=*/2, /*waiting=*/64});
  EXPECT_THAT(AnsweredIds(state), ElementsAre("r4", "r5"));  // Oldest first.
  // r3 is the third classified turn: the read stops at it, so the older
  // unclassified r2 does not wait (it waits behind no unclassified turn).
  EXPECT_THAT(state.waiting, IsEmpty());
  EXPECT_EQ(history.read(), 3u);
  EXPECT_EQ(state.last_turn->request_id, "r5");
}

TEST(LaneHistoryTest, TheBaselineIsTheNewestByRequestTimeThenId) {
  // Turns of one request time may come in any order.
  FakeHistory history({{"b", 10}, {"c", 10}, {"a", 10}});
  const LaneState state = Restore(history);
  ASSERT_TRUE(state.last_turn.has_value());
  EXPECT_EQ(state.last_turn->request_id, "c");
  ASSERT_NE(state.last_turn->snapshot, nullptr);
  EXPECT_EQ(state.last_turn->snapshot->request_id(), "c");
}

TEST(LaneHistoryTest, ASnapshotLessBaselineInheritsTheLastSnapshot) {
  FakeHistory history({{"r3", 30, v1::VERDICT_OK, /*snapshot=*/false},
                       {"r2", 20, v1::VERDICT_OK, /*snapshot=*/false},
                       {"r1", 10},
                       {"r0", 0}});
  const LaneState state = Restore(history);
  ASSERT_TRUE(state.last_turn.has_value());
  EXPECT_EQ(state.last_turn->request_id, "r3");
  ASSERT_NE(state.last_turn->snapshot, nullptr);
  EXPECT_EQ(state.last_turn->snapshot->request_id(), "r1");
  // Only r1's snapshot is decoded: not r0's, not the snapshot-less turns';
  // and only the baseline's whole turn.
  EXPECT_THAT(history.snapshots_asked(), ElementsAre("r1"));
  EXPECT_THAT(history.turns_asked(), ElementsAre("r3"));
}

TEST(LaneHistoryTest, NoSnapshotIsInheritedAcrossABreak) {
  FakeHistory history({{"r3", 30, v1::VERDICT_OK, /*snapshot=*/false},
                       {"r2", 20, v1::VERDICT_BREAK, /*snapshot=*/false},
                       {"r1", 10}});
  const LaneState state = Restore(history);
  ASSERT_TRUE(state.last_turn.has_value());
  EXPECT_EQ(state.last_turn->request_id, "r3");
  EXPECT_EQ(state.last_turn->snapshot, nullptr);
}

TEST(LaneHistoryTest, ASnapshotLessBreakInheritsNothing) {
  FakeHistory history(
      {{"r2", 20, v1::VERDICT_BREAK, /*snapshot=*/false}, {"r1", 10}});
  const LaneState state = Restore(history);
  EXPECT_EQ(state.last_turn->request_id, "r2");
  EXPECT_EQ(state.last_turn->snapshot, nullptr);
  EXPECT_THAT(history.snapshots_asked(), IsEmpty());
}

TEST(LaneHistoryTest, AOneHourWriteShowsAnHourTtl) {
  FakeHistory history({{"r2", 20},
                       {"r1", 10, v1::VERDICT_OK, true, /*write_5m=*/0,
                        /*write_1h=*/500}});
  EXPECT_EQ(Restore(history).observed_ttl_seconds, 3600u);
  EXPECT_EQ(history.earlier_ttl_asked(), 0);
}

TEST(LaneHistoryTest, TheNewestWriteDecidesTheTtl) {
  FakeHistory history(
      {{"r2", 20, v1::VERDICT_OK, true, /*write_5m=*/400, /*write_1h=*/0},
       {"r1", 10, v1::VERDICT_OK, true, /*write_5m=*/0, /*write_1h=*/500}});
  EXPECT_EQ(Restore(history).observed_ttl_seconds, 300u);
}

TEST(LaneHistoryTest, AnUnclassifiedTurnShowsNoTtl) {
  FakeHistory history(
      {{"r2", 20, kUnclassified, true, /*write_5m=*/0, /*write_1h=*/500},
       {"r1", 10, v1::VERDICT_OK, true, /*write_5m=*/400, /*write_1h=*/0}});
  EXPECT_EQ(Restore(history).observed_ttl_seconds, 300u);
}

TEST(LaneHistoryTest, WithoutAWriteReadTheTtlIsLookedUpFurtherBack) {
  FakeHistory history({{"r2", 20}, {"r1", 10}});
  history.set_earlier_ttl(3600);
  EXPECT_EQ(Restore(history).observed_ttl_seconds, 3600u);
  EXPECT_EQ(history.earlier_ttl_asked(), 1);
}

TEST(LaneHistoryTest, ALaneOfWaitingTurnsOnlyLooksUpNoTtl) {
  FakeHistory history({{"r1", 10, kUnclassified}});
  history.set_earlier_ttl(3600);
  const LaneState state = Restore(history);
  EXPECT_EQ(state.observed_ttl_seconds, 0u);
  EXPECT_FALSE(state.last_turn.has_value());
  EXPECT_EQ(history.earlier_ttl_asked(), 0);
}

TEST(LaneHistoryTest, ABreakIsAnsweredWithItsEvent) {
  FakeHistory history({{"r2", 20, v1::VERDICT_BREAK}, {"r1", 10}});
  const LaneState state = Restore(history);
  ASSERT_EQ(state.answered.size(), 2u);
  const v1::TurnClassification& answer = state.answered[1].classification;
  EXPECT_EQ(answer.verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(answer.missed_tokens(), 900);
  EXPECT_EQ(answer.cache_break().break_id(), "b-r2");
}

TEST(LaneHistoryTest, AnExpectedDropIsAnsweredWithItsHint) {
  FakeHistory history({{"r1", 10, v1::VERDICT_EXPECTED_DROP}});
  const LaneState state = Restore(history);
  ASSERT_EQ(state.answered.size(), 1u);
  EXPECT_EQ(state.answered[0].classification.expected_drop(),
            v1::EXPECTED_DROP_COMPACTION);
  EXPECT_EQ(state.answered[0].classification.expected_reuse_tokens(), 1000);
}

TEST(LaneHistoryTest, AHistoryErrorIsReturned) {
  FakeHistory rows({{"r2", 20}, {"r1", 10}});
  rows.fail_next_at(1);
  EXPECT_EQ(RestoreLaneState(rows, kLimits).status().code(),
            absl::StatusCode::kDataLoss);
  FakeHistory snapshots({{"r1", 10}});
  snapshots.fail_snapshots();
  EXPECT_EQ(RestoreLaneState(snapshots, kLimits).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cachewatch
