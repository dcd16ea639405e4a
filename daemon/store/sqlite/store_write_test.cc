// SqliteStore writes: round trips, idempotent retries, tool-list interning,
// group commit, back-pressure, a full database, migrations and file mode. Every
// test uses a real SQLite file in a fresh directory.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/store/sqlite/schema.h"
#include "daemon/store/sqlite/store_test_util.h"

namespace cachewatch::testing {
namespace {

// Writes turn r0 (cold start) and turn r1 (a break against r0) of `key`.
v1::PromptCacheBreak WriteBrokenPair(SqliteStore& store, const LaneKey& key) {
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

TEST_F(StoreTest, ListBreaksReturnsTheWrittenBreakUnchanged) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const v1::PromptCacheBreak event = WriteBrokenPair(*store, Key());

  absl::StatusOr<v1::ListBreaksResponse> list =
      store->ListBreaks(v1::ListBreaksRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->breaks_size(), 1);
  EXPECT_TRUE(ProtoEquals(event, list->breaks(0)));
  EXPECT_EQ(list->next_page_token(), "");
}

TEST_F(StoreTest, BreakColumnsHoldTheDocumentedLayouts) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  WriteBrokenPair(*store, Key());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM prompt_cache_breaks WHERE "
                     "primary_reason = 'tools_order_changed' AND "
                     "reasons = '[\"tools_order_changed\",\"system_changed\"]' "
                     "AND evidence = 'client_explained' AND provider = "
                     "'anthropic' AND ttl_source = 'response_write_split' AND "
                     "provider_agreement = 'agree' AND "
                     "changed_tool_names = '[\"Bash\",\"Read\"]'"),
            1);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM breaks_readable WHERE "
                     "request_time = '2026-09-21T14:14:20.000Z'"),
            1);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                     "verdict = 'break' AND primary_reason = "
                     "'tools_order_changed' AND system_hash = "
                     "'fedcba9876543210' AND length(message_chain) = 32 AND "
                     "json_array_length(system_sections) = 2 AND "
                     "json_extract(breakpoints, '$[1].segment') = 'messages' "
                     "AND tool_order_policy = 'lexicographic' AND "
                     "prompt_total_tokens = 42500"),
            1);
}

TEST_F(StoreTest, ExplainBreakRebuildsBothSnapshots) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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

TEST_F(StoreTest, ExplainBreakLeavesMissingSnapshotsAbsent) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  // A usage and a break, but no snapshot for either turn.
  const v1::PromptCacheBreak event = FullBreak(key, "r0", "r1", kT0);
  std::vector<StoreWrite> unit;
  unit.push_back(MakeUsage(key, "r1", kT0, Normalized(0, 0, 50000)));
  unit.push_back(BreakWrite(event));
  ASSERT_TRUE(store->Write(std::move(unit)).ok());

  absl::StatusOr<v1::ExplainBreakResponse> explained =
      store->ExplainBreak(event.break_id());
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_FALSE(explained->has_previous_snapshot());
  EXPECT_FALSE(explained->has_snapshot());
}

TEST_F(StoreTest, ExplainBreakUnknownIdIsNotFound) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  EXPECT_TRUE(
      absl::IsNotFound(store->ExplainBreak("0123456789abcdef").status()));
}

TEST_F(StoreTest, RetriesDoNotDuplicateOrOverwriteRows) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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
  ASSERT_TRUE(store
                  ->Write({MakeUsage(key, "r1", kT0 + 61 * kSecond,
                                     Normalized(1, 1, 1))})
                  .ok());

  EXPECT_EQ(CountRows("turns"), 2);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
  EXPECT_EQ(CountRows("tool_lists"), 1);
  EXPECT_EQ(CountRows("tool_list_entries"), 3);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                     "model = 'claude-sonnet-4-5' AND cache_read_tokens = "
                     "40000"),
            1);
}

TEST_F(StoreTest, UsageBeforeSnapshotKeepsTheSnapshotsRequestTime) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  ASSERT_TRUE(store
                  ->Write({MakeUsage(key, "r0", kT0 + 5 * kSecond,
                                     Normalized(1, 2, 3))})
                  .ok());
  EXPECT_EQ(QueryInt("SELECT request_time_us FROM turns"), kT0 + 5 * kSecond);
  ASSERT_TRUE(
      store
          ->Write({SnapshotWrite{key, std::make_shared<const v1::Snapshot>(
                                          FullSnapshot(key, "r0", kT0))}})
          .ok());
  EXPECT_EQ(CountRows("turns"), 1);
  EXPECT_EQ(QueryInt("SELECT request_time_us FROM turns"), kT0);
  EXPECT_EQ(QueryInt("SELECT response_time_us FROM turns"), kT0 + 5 * kSecond);
  EXPECT_EQ(QueryInt("SELECT snapshot_received + usage_received FROM turns"),
            2);
}

TEST_F(StoreTest, PendingVerdictNeverReplacesAFinalOne) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  ASSERT_TRUE(store->Write({Classified(key, "r0", v1::VERDICT_OK)}).ok());
  ASSERT_TRUE(store->Write({Classified(key, "r0", v1::VERDICT_PENDING)}).ok());
  absl::StatusOr<std::optional<v1::TurnClassification>> found =
      store->FindClassification(key, "r0");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->verdict(), v1::VERDICT_OK);
}

// A usage retried after a crash that the daemon would classify again (its
// ack lost, its commit not) must not turn a stored `ok` into a break, nor add
// a break row beside it.
TEST_F(StoreTest, AStoredVerdictIsNeverRewritten) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 0);
  // A pending turn still takes its final verdict, and its break.
  ASSERT_TRUE(store->Write({Classified(key, "r2", v1::VERDICT_PENDING)}).ok());
  ASSERT_TRUE(store->Write({BreakWrite(FullBreak(key, "r1", "r2", kT0))}).ok());
  found = store->FindClassification(key, "r2");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->verdict(), v1::VERDICT_BREAK);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
}

TEST_F(StoreTest, IdenticalToolListsAreStoredOnce) {
  std::unique_ptr<SqliteStore> store = OpenStore();
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

  EXPECT_EQ(CountRows("turns"), 101);
  EXPECT_EQ(CountRows("tool_lists"), 2);
  EXPECT_EQ(CountRows("tool_list_entries"), 6);
  EXPECT_EQ(QueryInt("SELECT count(DISTINCT tool_list_hash) FROM turns"), 2);
}

// With the optional extra delay (--group-commit-us), concurrent writers wait
// for each other and share commits. Without it, how many writes share a
// commit depends on the scheduling; WritesQueuedDuringACommitShareTheNextOne
// tests that case without a clock.
TEST_F(StoreTest, GroupCommitDelayBatchesConcurrentWrites) {
  StoreOptions options = Options();
  options.max_batch_delay = std::chrono::milliseconds(2);
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  constexpr int kThreads = 8;
  constexpr int kWritesPerThread = 500;
  std::atomic<int> failures{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &failures, t] {
      const LaneKey key = Key(absl::StrCat("s", t));
      for (int i = 0; i < kWritesPerThread; ++i) {
        const std::string request_id = absl::StrCat("r", i);
        if (!store
                 ->Write(TurnUnit(key, request_id, kT0 + i * kSecond,
                                  Classified(key, request_id, v1::VERDICT_OK)))
                 .ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  constexpr int kWrites = kThreads * kWritesPerThread;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(CountRows("turns"), kWrites);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE snapshot_received = 1 "
                     "AND usage_received = 1 AND verdict = 'ok'"),
            kWrites);
  const StoreStats stats = store->stats();
  EXPECT_EQ(stats.committed_records, 3 * kWrites);
  EXPECT_EQ(stats.failed_commits, 0);
  EXPECT_LT(stats.commits, kWrites / 2);
  EXPECT_EQ(stats.queued_records, 0u);
  std::printf(
      "group commit: %d Write() calls (%d records) from %d threads in %.2f s "
      "(%.0f records/s), %lld commits\n",
      kWrites, 3 * kWrites, kThreads, seconds, 3 * kWrites / seconds,
      static_cast<long long>(stats.commits));
}

// Leader/follower group commit: a write with no commit in flight commits
// alone; writes arriving while a commit is in flight are committed together
// in the next transaction.
TEST_F(StoreTest, WritesQueuedDuringACommitShareTheNextOne) {
  absl::Mutex mu;
  std::vector<size_t> batches;  // Guarded by mu.
  absl::Notification first_commit_started;
  absl::Notification release_first_commit;
  StoreOptions options = Options();
  options.before_commit = [&](size_t records) {
    {
      absl::MutexLock lock(&mu);
      batches.push_back(records);
    }
    if (!first_commit_started.HasBeenNotified()) {
      first_commit_started.Notify();
      release_first_commit.WaitForNotification();
    }
  };
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  const LaneKey key = Key();

  std::thread leader([&] {
    EXPECT_TRUE(store->Write({Classified(key, "first", v1::VERDICT_OK)}).ok());
  });
  first_commit_started.WaitForNotification();
  constexpr int kFollowers = 3;
  std::vector<std::thread> followers;
  for (int i = 0; i < kFollowers; ++i) {
    followers.emplace_back([&, i] {
      EXPECT_TRUE(store
                      ->Write({Classified(key, absl::StrCat("next", i),
                                          v1::VERDICT_OK)})
                      .ok());
    });
  }
  while (store->queued_records() < kFollowers) std::this_thread::yield();
  release_first_commit.Notify();
  leader.join();
  for (std::thread& follower : followers) follower.join();

  absl::MutexLock lock(&mu);
  EXPECT_EQ(batches, (std::vector<size_t>{1, kFollowers}));
  EXPECT_EQ(store->stats().commits, 2);
  EXPECT_EQ(CountRows("turns"), 1 + kFollowers);
}

TEST_F(StoreTest, FullQueueAnswersResourceExhausted) {
  StoreOptions options = Options();
  options.max_queued_records = 10;
  options.max_batch_delay = std::chrono::seconds(2);
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  const LaneKey key = Key();

  // Five records wait out the batch delay in the queue...
  std::thread waiting([&] {
    std::vector<StoreWrite> unit;
    for (int i = 0; i < 5; ++i) {
      unit.push_back(Classified(key, absl::StrCat("a", i), v1::VERDICT_OK));
    }
    EXPECT_TRUE(store->Write(std::move(unit)).ok());
  });
  while (store->queued_records() < 5) std::this_thread::yield();
  // ... so six more do not fit.
  std::vector<StoreWrite> unit;
  for (int i = 0; i < 6; ++i) {
    unit.push_back(Classified(key, absl::StrCat("b", i), v1::VERDICT_OK));
  }
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = store->Write(std::move(unit));
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(store->stats().rejected_records, 6);
  waiting.join();
  EXPECT_EQ(CountRows("turns"), 5);
}

TEST_F(StoreTest, FullDatabaseIsUnavailableThenRecovers) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  const v1::PromptCacheBreak event = WriteBrokenPair(*store, key);
  const int64_t pages = QueryInt("PRAGMA page_count");
  ASSERT_TRUE(store->SetMaxPageCountForTesting(pages).ok());

  // Enough new rows to need pages the cap forbids.
  std::vector<StoreWrite> big;
  for (int i = 0; i < 300; ++i) {
    const std::string request_id = absl::StrCat("big", i);
    for (StoreWrite& write :
         TurnUnit(key, request_id, kT0 + (100 + i) * kSecond,
                  Classified(key, request_id, v1::VERDICT_OK))) {
      big.push_back(std::move(write));
    }
  }
  const absl::Status full = store->Write(big);
  EXPECT_TRUE(absl::IsUnavailable(full)) << full;
  StoreStats stats = store->stats();
  EXPECT_TRUE(stats.last_commit_failed);
  EXPECT_NE(stats.last_error, "");
  EXPECT_EQ(CountRows("turns"), 2);  // The failed unit left nothing behind.

  // Reads still work while writes fail.
  absl::StatusOr<v1::ExplainBreakResponse> explained =
      store->ExplainBreak(event.break_id());
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_TRUE(ProtoEquals(event, explained->cache_break()));

  // Space again: the same store writes, and nothing committed was lost.
  ASSERT_TRUE(store->SetMaxPageCountForTesting(1 << 30).ok());
  const absl::Status recovered = store->Write(big);
  EXPECT_TRUE(recovered.ok()) << recovered;
  EXPECT_FALSE(store->stats().last_commit_failed);
  EXPECT_EQ(CountRows("turns"), 302);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
}

TEST_F(StoreTest, EmptyWriteSucceedsWithoutACommit) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  EXPECT_TRUE(store->Write({}).ok());
  EXPECT_EQ(store->stats().commits, 0);
}

TEST_F(StoreTest, NewerSchemaIsFailedPrecondition) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  const absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(Options());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_EQ(QueryInt("PRAGMA user_version"), 99);  // Left untouched.
  EXPECT_EQ(QueryInt("SELECT count(*) FROM sqlite_master"), 0);
}

TEST_F(StoreTest, ReopeningKeepsDataAndSchemaVersion) {
  {
    std::unique_ptr<SqliteStore> store = OpenStore();
    WriteBrokenPair(*store, Key());
  }
  EXPECT_EQ(QueryInt("PRAGMA user_version"), LatestSchemaVersion());
  std::unique_ptr<SqliteStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(QueryInt("PRAGMA user_version"), LatestSchemaVersion());
  EXPECT_EQ(CountRows("turns"), 2);
  EXPECT_EQ(store->ListBreaks(v1::ListBreaksRequest())->breaks_size(), 1);
}

TEST_F(StoreTest, MigratesAVersionOneDatabaseKeepingItsRows) {
  {
    std::unique_ptr<SqliteStore> store = OpenStore();
    WriteBrokenPair(*store, Key());
  }
  // Take the file back to what version 1 wrote: its indexes, user_version 1.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, R"sql(
      DROP INDEX breaks_by_agent_reason;
      DROP INDEX breaks_by_session;
      DROP INDEX breaks_by_reason_time;
      CREATE INDEX breaks_by_reason_time
        ON prompt_cache_breaks (primary_reason, request_time_us);
      DROP INDEX breaks_with_reorders;
      DROP INDEX breaks_with_schema_changes;
      PRAGMA user_version = 1;
    )sql",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  std::unique_ptr<SqliteStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(QueryInt("PRAGMA user_version"), 2);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                     " AND name IN ('breaks_by_agent_reason',"
                     " 'breaks_by_session', 'breaks_with_reorders',"
                     " 'breaks_with_schema_changes')"),
            4);
  EXPECT_EQ(QueryInt("SELECT count(*) FROM pragma_index_info("
                     "'breaks_by_reason_time')"),
            6);
  EXPECT_EQ(CountRows("turns"), 2);
  EXPECT_EQ(store->ListBreaks(v1::ListBreaksRequest())->breaks_size(), 1);
  WriteBrokenPair(*store, Key("after-migration"));
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 2);
}

TEST_F(StoreTest, CreatesTheFileWithMode0600InWalMode) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  ASSERT_TRUE(store->Write({Classified(Key(), "r0", v1::VERDICT_OK)}).ok());
  struct stat info;
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  ASSERT_EQ(::stat((path_ + "-wal").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
               "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(StoreTest, CheckpointsTheWalOnItsOwnThread) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  ASSERT_TRUE(store->Write({Classified(Key(), "first", v1::VERDICT_OK)}).ok());
  struct stat info;
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  const off_t size_before = info.st_size;
  // Well past the 1000-page threshold: one commit per call, 20 turns each.
  for (int call = 0; call < 200; ++call) {
    std::vector<StoreWrite> writes;
    for (int turn = 0; turn < 20; ++turn) {
      writes.push_back(Classified(Key(), absl::StrCat("r", call, "-", turn),
                                  v1::VERDICT_OK));
    }
    ASSERT_TRUE(store->Write(std::move(writes)).ok());
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store->stats().checkpoints == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(store->stats().checkpoints, 0);
  // The checkpoint moved committed pages into the database file itself.
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_GT(info.st_size, size_before);
  EXPECT_EQ(CountRows("turns"), 4001);
}

TEST_F(StoreTest, OpenFailsInAMissingDirectory) {
  StoreOptions options = Options();
  options.path = dir_ + "/missing/cachewatch.db";
  EXPECT_TRUE(absl::IsUnavailable(SqliteStore::Open(options).status()));
}

}  // namespace
}  // namespace cachewatch::testing
