// Test helpers for the store: a fixture with a fresh directory per test,
// direct SQL on the database file, and records with every field set, over
// the core's test turns (daemon/core/test_turns.h: kT0, Tool, Usage).
// For tests only.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_STORE_TEST_UTIL_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_STORE_TEST_UTIL_H_

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/test_turns.h"
#include "daemon/store/sqlite/sqlite_store.h"
#include "daemon/util/temp_dir.h"

namespace cachewatch::testing {

inline google::protobuf::Timestamp Time(int64_t us) {
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(us);
}

// Proto equality with the differences in the failure message.
inline ::testing::AssertionResult ProtoEquals(
    const google::protobuf::Message& expected,
    const google::protobuf::Message& actual) {
  std::string differences;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  if (differencer.Compare(expected, actual)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << differences;
}

inline LaneKey Key(std::string session = "s1", std::string lane = "main",
                   std::string agent = "agent") {
  return {std::move(agent), std::move(session), std::move(lane)};
}

// A snapshot with every field set; the tools are Read, Write, Bash.
inline v1::Snapshot FullSnapshot(const LaneKey& key,
                                 const std::string& request_id,
                                 int64_t time_us) {
  v1::Snapshot snapshot;
  snapshot.set_agent(key.agent);
  snapshot.set_session_id(key.session_id);
  snapshot.set_lane(key.lane);
  snapshot.set_request_id(request_id);
  *snapshot.mutable_request_time() = Time(time_us);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(0xfedcba9876543210ULL);
  v1::SystemSection* section = snapshot.add_system_sections();
  section->set_name("base");
  section->set_hash(1);
  section = snapshot.add_system_sections();
  section->set_name("date");
  section->set_hash(static_cast<uint64_t>(time_us));
  *snapshot.add_tools() = Tool("Read", 0x1111);
  *snapshot.add_tools() = Tool("Write", 0x2222);
  *snapshot.add_tools() = Tool("Bash", 0xffffffffffffffffULL);
  v1::CacheControl* control = snapshot.mutable_cache_control();
  control->set_enabled(true);
  control->set_ttl_seconds(3600);
  v1::Breakpoint* breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_TOOLS);
  breakpoint->set_index(2);
  breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
  breakpoint->set_index(3);
  breakpoint->set_ttl_seconds(300);
  snapshot.set_options_hash(0x77);
  for (uint64_t block : {11ULL, 22ULL, 0x8000000000000001ULL, 44ULL}) {
    snapshot.add_message_chain(block);
  }
  snapshot.set_tool_order_policy(v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  return snapshot;
}

inline UsageWrite MakeUsage(const LaneKey& key, const std::string& request_id,
                            int64_t response_time_us,
                            const v1::NormalizedUsage& normalized) {
  UsageWrite write{key, {}, normalized};
  write.usage.set_agent(key.agent);
  write.usage.set_session_id(key.session_id);
  write.usage.set_lane(key.lane);
  write.usage.set_request_id(request_id);
  *write.usage.mutable_response_time() = Time(response_time_us);
  write.usage.set_provider(v1::PROVIDER_ANTHROPIC);
  write.usage.set_model("claude-sonnet-4-5");
  *write.usage.mutable_normalized() = normalized;
  return write;
}

// A break with every field set.
inline v1::PromptCacheBreak FullBreak(
    const LaneKey& key, const std::string& previous_request_id,
    const std::string& request_id, int64_t time_us,
    v1::Reason reason = v1::REASON_TOOLS_ORDER_CHANGED) {
  v1::PromptCacheBreak event;
  event.set_break_id(BreakIdFor(key, request_id));
  event.set_agent(key.agent);
  event.set_session_id(key.session_id);
  event.set_lane(key.lane);
  event.set_provider(v1::PROVIDER_ANTHROPIC);
  event.set_previous_request_id(previous_request_id);
  event.set_request_id(request_id);
  event.set_previous_model("claude-sonnet-4-5");
  event.set_model("claude-sonnet-4-5");
  event.set_primary_reason(reason);
  event.add_reasons(reason);
  event.add_reasons(v1::REASON_SYSTEM_CHANGED);
  event.set_evidence(v1::EVIDENCE_CLIENT_EXPLAINED);
  event.set_previous_cache_read_tokens(50000);
  event.set_current_cache_read_tokens(1000);
  event.set_expected_reuse_tokens(52000);
  event.set_missed_tokens(51000);
  event.set_prompt_total_tokens(53000);
  event.set_cache_write_tokens(51500);
  event.add_changed_tool_names("Bash");
  event.add_changed_tool_names("Read");
  event.add_added_tool_names("Grep");
  event.add_removed_tool_names("Edit");
  event.add_reordered_tool_names("Read");
  event.add_schema_changed_tool_names("Bash");
  event.set_first_changed_tool_index(0);
  event.add_changed_system_sections("date");
  event.set_first_changed_message_block(2);
  event.set_blocks_since_last_write(1);
  event.set_gap_seconds(12.5);
  event.set_ttl_seconds(300);
  event.set_ttl_source(v1::TTL_SOURCE_RESPONSE_WRITE_SPLIT);
  event.set_has_estimated_cost(true);
  event.set_estimated_extra_cost_usd(0.1683);
  *event.mutable_previous_request_time() = Time(time_us - 12'500'000);
  *event.mutable_request_time() = Time(time_us);
  event.set_provider_miss_reason("tools_changed");
  event.set_provider_missed_tokens(51000);
  event.set_provider_agreement(v1::PROVIDER_AGREEMENT_AGREE);
  return event;
}

inline ClassificationWrite Classified(const LaneKey& key,
                                      const std::string& request_id,
                                      v1::Verdict verdict) {
  ClassificationWrite write{key, request_id, {}};
  write.classification.set_verdict(verdict);
  write.classification.set_expected_reuse_tokens(
      verdict == v1::VERDICT_OK ? 40000 : 0);
  return write;
}

inline ClassificationWrite BreakWrite(const v1::PromptCacheBreak& event) {
  ClassificationWrite write{{event.agent(), event.session_id(), event.lane()},
                            event.request_id(),
                            {}};
  write.classification.set_verdict(v1::VERDICT_BREAK);
  *write.classification.mutable_cache_break() = event;
  write.classification.set_expected_reuse_tokens(event.expected_reuse_tokens());
  write.classification.set_missed_tokens(event.missed_tokens());
  return write;
}

// A whole turn as the daemon writes it: snapshot, usage, classification.
inline std::vector<StoreWrite> TurnUnit(const LaneKey& key,
                                        const std::string& request_id,
                                        int64_t time_us,
                                        ClassificationWrite classification) {
  std::vector<StoreWrite> unit;
  unit.push_back(
      SnapshotWrite{key, std::make_shared<const v1::Snapshot>(
                             FullSnapshot(key, request_id, time_us))});
  unit.push_back(
      MakeUsage(key, request_id, time_us + kSecond, Usage(40000, 2000, 500)));
  unit.push_back(std::move(classification));
  return unit;
}

// Writes turn r0 (cold start) and turn r1 (a break against r0) of `key`;
// returns r1's break.
inline v1::PromptCacheBreak WriteBrokenPair(RecordStore& store,
                                            const LaneKey& key) {
  EXPECT_TRUE(
      store
          .Write(TurnUnit(key, "r0", kT0,
                          Classified(key, "r0", v1::VERDICT_COLD_START)))
          .ok());
  const v1::PromptCacheBreak event =
      FullBreak(key, "r0", "r1", kT0 + 60 * kSecond);
  EXPECT_TRUE(
      store.Write(TurnUnit(key, "r1", kT0 + 60 * kSecond, BreakWrite(event)))
          .ok());
  return event;
}

// Writes `turns` whole classified turns (TurnUnit) to each of `lanes` lanes
// (sessions s0, s1, ...), each lane from a thread of its own, all at once;
// returns how many writes failed.
inline int WriteLanesConcurrently(RecordStore& store, int lanes, int turns) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < lanes; ++t) {
    threads.emplace_back([&store, &failures, t, turns] {
      const LaneKey key = Key(absl::StrCat("s", t));
      for (int i = 0; i < turns; ++i) {
        const std::string id = absl::StrCat("r", i);
        if (!store
                 .Write(TurnUnit(key, id, kT0 + i * kSecond,
                                 Classified(key, id, v1::VERDICT_OK)))
                 .ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return failures.load();
}

// A fresh directory per test, removed afterwards.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir_.path();
    path_ = temp_dir_.File("cachewatch.db");
  }

  StoreOptions Options() const {
    StoreOptions options;
    options.path = path_;
    return options;
  }

  std::unique_ptr<SqliteStore> OpenStore() { return OpenStore(Options()); }

  std::unique_ptr<SqliteStore> OpenStore(const StoreOptions& options) {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // The integer a one-row, one-column query returns, on a separate
  // connection; -1 on error.
  int64_t QueryInt(const std::string& sql) const {
    sqlite3* db = nullptr;
    int64_t value = -1;
    if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) ==
              SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW) {
        value = sqlite3_column_int64(stmt, 0);
      } else {
        ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
      }
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return value;
  }

  int64_t CountRows(const std::string& table) const {
    return QueryInt("SELECT count(*) FROM " + table);
  }

  TempDir temp_dir_{"store_test"};
  std::string dir_;
  std::string path_;
};

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_STORE_TEST_UTIL_H_
