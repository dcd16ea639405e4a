// TurnMerger: which records of a batch each merged turn holds, in both
// orders. That the SQLite store's rows come out as with one upsert per
// record is tested in daemon/store/sqlite/store_write_test.cc.
#include "daemon/store/turn_merge.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cachewatch {
namespace {

LaneKey Key(std::string lane = "main") { return {"agent", "s1", lane}; }

SnapshotWrite Snapshot(const std::string& request_id,
                       const LaneKey& key = Key()) {
  auto snapshot = std::make_shared<v1::Snapshot>();
  snapshot->set_request_id(request_id);
  return {key, std::move(snapshot)};
}

UsageWrite Usage(const std::string& request_id) {
  UsageWrite write{Key(), {}, {}};
  write.usage.set_request_id(request_id);
  return write;
}

ClassificationWrite Classification(
    const std::string& request_id, v1::Verdict verdict,
    v1::ExpectedDrop drop = v1::EXPECTED_DROP_UNSPECIFIED) {
  ClassificationWrite write{Key(), request_id, {}};
  write.classification.set_verdict(verdict);
  write.classification.set_expected_drop(drop);
  return write;
}

// Adds every record in order; returns what each Add() answered.
std::vector<std::optional<size_t>> AddAll(
    TurnMerger& merger, const std::vector<StoreWrite>& writes) {
  std::vector<std::optional<size_t>> answers;
  for (const StoreWrite& write : writes) answers.push_back(merger.Add(write));
  return answers;
}

const SnapshotWrite* SnapshotAt(const std::vector<StoreWrite>& writes,
                                size_t i) {
  return &std::get<SnapshotWrite>(writes[i]);
}
const UsageWrite* UsageAt(const std::vector<StoreWrite>& writes, size_t i) {
  return &std::get<UsageWrite>(writes[i]);
}
const ClassificationWrite* ClassificationAt(
    const std::vector<StoreWrite>& writes, size_t i) {
  return &std::get<ClassificationWrite>(writes[i]);
}

class TurnMergerTest : public ::testing::TestWithParam<TurnMerger::Order> {};

INSTANTIATE_TEST_SUITE_P(
    Orders, TurnMergerTest,
    ::testing::Values(TurnMerger::Order::kCanonical,
                      TurnMerger::Order::kAsWritten),
    [](const ::testing::TestParamInfo<TurnMerger::Order>& info) {
      return info.param == TurnMerger::Order::kCanonical ? "Canonical"
                                                         : "AsWritten";
    });

TEST_P(TurnMergerTest, AWholeTurnInOneBatchIsOneMergedTurn) {
  const std::vector<StoreWrite> writes = {Snapshot("r1"), Usage("r1"),
                                          Classification("r1", v1::VERDICT_OK)};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, 0, 0}));
  ASSERT_EQ(merger.turns().size(), 1u);
  const MergedTurn& turn = merger.turns()[0];
  EXPECT_EQ(turn.key->session_id, "s1");
  EXPECT_EQ(*turn.request_id, "r1");
  EXPECT_EQ(turn.snapshot, SnapshotAt(writes, 0));
  EXPECT_EQ(turn.usage, UsageAt(writes, 1));
  EXPECT_EQ(turn.classification, ClassificationAt(writes, 2));
}

TEST_P(TurnMergerTest, UsageAndClassificationOnlyAreOneMergedTurn) {
  const std::vector<StoreWrite> writes = {Usage("r1"),
                                          Classification("r1", v1::VERDICT_OK)};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes), (std::vector<std::optional<size_t>>{0, 0}));
  ASSERT_EQ(merger.turns().size(), 1u);
  EXPECT_EQ(merger.turns()[0].snapshot, nullptr);
  EXPECT_EQ(merger.turns()[0].usage, UsageAt(writes, 0));
  EXPECT_EQ(merger.turns()[0].classification, ClassificationAt(writes, 1));
}

TEST_P(TurnMergerTest, TurnsAreKeptApartInTheOrderOfTheirFirstRecord) {
  const std::vector<StoreWrite> writes = {Snapshot("r2"), Snapshot("r1"),
                                          Snapshot("r2", Key("other")),
                                          Usage("r1"), Usage("r2")};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, 1, 2, 1, 0}));
  ASSERT_EQ(merger.turns().size(), 3u);
  EXPECT_EQ(merger.turns()[0].usage, UsageAt(writes, 4));
  EXPECT_EQ(merger.turns()[2].key->lane, "other");
  EXPECT_EQ(merger.turns()[2].usage, nullptr);
}

TEST_P(TurnMergerTest, AnEmptyLaneIsLaneMain) {
  TurnMerger merger(GetParam());
  EXPECT_EQ(merger.Add(Snapshot("r1", Key(""))), 0u);
  EXPECT_EQ(merger.Add(Usage("r1")), 0u);
  EXPECT_EQ(merger.turns().size(), 1u);
}

TEST_P(TurnMergerTest, ARetriedSnapshotOrUsageChangesNothing) {
  const std::vector<StoreWrite> writes = {Snapshot("r1"), Snapshot("r1"),
                                          Usage("r1"), Usage("r1")};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes), (std::vector<std::optional<size_t>>{
                                        0, std::nullopt, 0, std::nullopt}));
  ASSERT_EQ(merger.turns().size(), 1u);
  EXPECT_EQ(merger.turns()[0].snapshot, SnapshotAt(writes, 0));
  EXPECT_EQ(merger.turns()[0].usage, UsageAt(writes, 2));
}

TEST_P(TurnMergerTest, AFinalVerdictReplacesAPendingOne) {
  const std::vector<StoreWrite> writes = {
      Usage("r1"), Classification("r1", v1::VERDICT_PENDING),
      Classification("r1", v1::VERDICT_OK)};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, 0, 0}));
  ASSERT_EQ(merger.turns().size(), 1u);
  EXPECT_EQ(merger.turns()[0].classification, ClassificationAt(writes, 2));
}

TEST_P(TurnMergerTest, NothingReplacesAFinalVerdictAndPendingReplacesNone) {
  const std::vector<StoreWrite> writes = {
      Classification("r1", v1::VERDICT_OK),
      Classification("r1", v1::VERDICT_BREAK),
      Classification("r1", v1::VERDICT_PENDING),
      Classification("r2", v1::VERDICT_PENDING),
      Classification("r2", v1::VERDICT_PENDING)};
  TurnMerger merger(GetParam());
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, std::nullopt, std::nullopt,
                                                1, std::nullopt}));
  ASSERT_EQ(merger.turns().size(), 2u);
  EXPECT_EQ(merger.turns()[0].classification, ClassificationAt(writes, 0));
  EXPECT_EQ(merger.turns()[1].classification, ClassificationAt(writes, 3));
}

// Records whose effect the canonical order would change: kCanonical merges
// them anyway, kAsWritten starts the turn's next merged turn.
TEST_P(TurnMergerTest, OutOfOrderRecordsSplitOnlyAsWritten) {
  const bool canonical = GetParam() == TurnMerger::Order::kCanonical;
  const std::vector<StoreWrite> writes = {
      Usage("r1"),
      Snapshot("r1"),  // Its provider and model win over the usage's.
      Classification("r2", v1::VERDICT_BREAK),
      Usage("r2"),  // Its response time fills the request time after.
      Classification("r3", v1::VERDICT_PENDING, v1::EXPECTED_DROP_COMPACTION),
      Classification("r3", v1::VERDICT_OK, v1::EXPECTED_DROP_CACHE_EDIT),
      Classification("r4", v1::VERDICT_PENDING, v1::EXPECTED_DROP_COMPACTION),
      Classification("r4", v1::VERDICT_OK, v1::EXPECTED_DROP_COMPACTION)};
  TurnMerger merger(GetParam());
  if (canonical) {
    EXPECT_EQ(AddAll(merger, writes),
              (std::vector<std::optional<size_t>>{0, 0, 1, 1, 2, 2, 3, 3}));
    ASSERT_EQ(merger.turns().size(), 4u);
    EXPECT_EQ(merger.turns()[0].snapshot, SnapshotAt(writes, 1));
    EXPECT_EQ(merger.turns()[0].usage, UsageAt(writes, 0));
    EXPECT_EQ(merger.turns()[2].classification, ClassificationAt(writes, 5));
    return;
  }
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, 1, 2, 3, 4, 5, 6, 6}));
  ASSERT_EQ(merger.turns().size(), 7u);
  EXPECT_EQ(merger.turns()[0].usage, UsageAt(writes, 0));
  EXPECT_EQ(merger.turns()[0].snapshot, nullptr);
  EXPECT_EQ(merger.turns()[1].snapshot, SnapshotAt(writes, 1));
  EXPECT_EQ(merger.turns()[1].usage, nullptr);
  EXPECT_EQ(*merger.turns()[3].request_id, "r2");
  EXPECT_EQ(merger.turns()[3].usage, UsageAt(writes, 3));
  EXPECT_EQ(merger.turns()[4].classification, ClassificationAt(writes, 4));
  EXPECT_EQ(merger.turns()[5].classification, ClassificationAt(writes, 5));
  // The same expected drop: the final verdict replaces the pending one.
  EXPECT_EQ(merger.turns()[6].classification, ClassificationAt(writes, 7));
}

// After a split, a record joins the turn's last merged turn where it can.
TEST(TurnMergerAsWrittenTest, LaterRecordsJoinTheLastMergedTurn) {
  const std::vector<StoreWrite> writes = {
      Classification("r1", v1::VERDICT_PENDING), Snapshot("r1"), Usage("r1"),
      Classification("r1", v1::VERDICT_OK), Snapshot("r1")};
  TurnMerger merger(TurnMerger::Order::kAsWritten);
  EXPECT_EQ(AddAll(merger, writes),
            (std::vector<std::optional<size_t>>{0, 1, 1, 1, std::nullopt}));
  ASSERT_EQ(merger.turns().size(), 2u);
  EXPECT_EQ(merger.turns()[0].classification, ClassificationAt(writes, 0));
  EXPECT_EQ(merger.turns()[1].snapshot, SnapshotAt(writes, 1));
  EXPECT_EQ(merger.turns()[1].usage, UsageAt(writes, 2));
  EXPECT_EQ(merger.turns()[1].classification, ClassificationAt(writes, 3));
}

}  // namespace
}  // namespace cachewatch
