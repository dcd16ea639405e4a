// SqliteStore-only writes: JSON columns, tool-list re-interning after
// retention, a batch's records merged per turn, group commit, back-pressure, a
// full database, migrations and file mode. The behaviour both stores share
// (round trips, retries, verdicts, queries, retention) is tested on both by
// daemon/store/postgres/store_conformance_test.cc. Every test uses a real
// SQLite file in a fresh directory.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/store/sqlite/checkpointer.h"
#include "daemon/store/sqlite/schema.h"
#include "daemon/store/sqlite/store_test_util.h"
#include "daemon/store/sqlite/write_statements.h"

namespace cachewatch::testing {
namespace {

// The snapshot's JSON columns, read with SQLite's JSON functions (the
// conformance suite checks the portable columns on both stores).
TEST_F(StoreTest, SnapshotJsonColumnsHoldTheDocumentedLayouts) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  WriteBrokenPair(*store, Key());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                     "json_array_length(system_sections) = 2 AND "
                     "json_extract(breakpoints, '$[1].segment') = 'messages'"),
            1);
}

// Every row of `table` (ordered by `order`), all columns but
// received_at_us (the commit's clock), as text; NULL apart from "".
std::string DumpRows(const std::string& path, const std::string& table,
                     const std::string& order) {
  sqlite3* db = nullptr;
  std::string out;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string sql = "SELECT * FROM " + table + " ORDER BY " + order;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const std::string name = sqlite3_column_name(stmt, c);
      if (name == "received_at_us") continue;
      absl::StrAppend(&out, name, "=");
      if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
        out += "NULL";
      } else {
        const void* bytes = sqlite3_column_blob(stmt, c);
        out.append(static_cast<const char*>(bytes),
                   static_cast<size_t>(sqlite3_column_bytes(stmt, c)));
      }
      out += " ";
    }
    out += "\n";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

std::string DumpStore(const std::string& path) {
  return DumpRows(path, "turns", "id") +
         DumpRows(path, "prompt_cache_breaks", "rowid") +
         DumpRows(path, "tool_lists", "rowid") +
         DumpRows(path, "tool_list_entries", "rowid");
}

// The records of one turn that set a column the others set too, each
// differently or NULL: a snapshot without provider, model, request time or
// expected drop, and one with them; a retry of each with other values; a
// usage and its retry; a pending verdict, a final one and a break, with
// three different expected drops; and, stored before, another pending
// verdict and another final one.
enum class Rec {
  kBare,
  kFull,
  kSnapshotRetry,
  kUsage,
  kUsageRetry,
  kPending,
  kFinal,
  kBreak,
  kStoredPending,
  kStoredFinal
};

StoreWrite Make(Rec rec, const LaneKey& key, const std::string& id) {
  switch (rec) {
    case Rec::kBare: {
      v1::Snapshot snapshot = FullSnapshot(key, id, kT0);
      snapshot.clear_provider();
      snapshot.clear_model();
      snapshot.clear_request_time();
      return SnapshotWrite{key, std::make_shared<const v1::Snapshot>(snapshot)};
    }
    case Rec::kFull: {
      v1::Snapshot snapshot = FullSnapshot(key, id, kT0);
      snapshot.set_expected_drop(v1::EXPECTED_DROP_RESUMED);
      return SnapshotWrite{key, std::make_shared<const v1::Snapshot>(snapshot)};
    }
    case Rec::kSnapshotRetry: {
      v1::Snapshot snapshot = FullSnapshot(key, id, kT0 + 7 * kSecond);
      snapshot.clear_tools();
      *snapshot.add_tools() = Tool("Grep", 0x3333);
      snapshot.set_model("claude-opus-4");
      return SnapshotWrite{key, std::make_shared<const v1::Snapshot>(snapshot)};
    }
    case Rec::kUsage: {
      UsageWrite usage =
          MakeUsage(key, id, kT0 + kSecond, Usage(40000, 2000, 500));
      usage.usage.set_provider(v1::PROVIDER_OPENAI);
      usage.usage.set_model("gpt-5");
      return usage;
    }
    case Rec::kUsageRetry:
      return MakeUsage(key, id, kT0 + 9 * kSecond, Usage(1, 2, 3));
    case Rec::kPending: {
      ClassificationWrite write = Classified(key, id, v1::VERDICT_PENDING);
      write.classification.set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
      return write;
    }
    case Rec::kFinal: {
      ClassificationWrite write = Classified(key, id, v1::VERDICT_OK);
      write.classification.set_expected_drop(v1::EXPECTED_DROP_CACHE_EDIT);
      return write;
    }
    case Rec::kStoredPending: {
      ClassificationWrite write = Classified(key, id, v1::VERDICT_PENDING);
      write.classification.set_expected_reuse_tokens(7);
      return write;
    }
    case Rec::kStoredFinal:
      return Classified(key, id, v1::VERDICT_COLD_START);
    case Rec::kBreak: {
      ClassificationWrite write =
          BreakWrite(FullBreak(key, "r0", id, kT0 + 5 * kSecond));
      write.classification.set_expected_drop(v1::EXPECTED_DROP_COMPACTION);
      return write;
    }
  }
  return StoreWrite{};
}

// A batch's records merged per turn give exactly the rows (turns, breaks,
// tool lists) that one upsert per record gives, for every order of these
// records, after each of these stored states: every permutation of each
// record set, each a turn of its own, written after its stored state, as
// one batch into one store and one record per batch into the other.
TEST_F(StoreTest, MergedTurnsWriteWhatOneUpsertPerRecordWrites) {
  const std::vector<std::vector<Rec>> stored = {{},
                                                {Rec::kStoredPending},
                                                {Rec::kStoredFinal},
                                                {Rec::kUsageRetry},
                                                {Rec::kSnapshotRetry},
                                                {Rec::kBare}};
  const std::vector<std::vector<Rec>> sets = {
      {Rec::kBare, Rec::kUsage, Rec::kBreak},
      {Rec::kBare, Rec::kUsage, Rec::kPending, Rec::kFinal},
      {Rec::kFull, Rec::kSnapshotRetry, Rec::kUsage, Rec::kUsageRetry},
      {Rec::kUsage, Rec::kPending, Rec::kBreak, Rec::kFinal},
      {Rec::kBare, Rec::kPending, Rec::kBreak},
      {Rec::kFull, Rec::kPending, Rec::kFinal}};
  StoreOptions merged_options = Options();
  StoreOptions single_options = Options();
  single_options.path = dir_ + "/single.db";
  std::unique_ptr<SqliteStore> merged = OpenStore(merged_options);
  std::unique_ptr<SqliteStore> single = OpenStore(single_options);
  const LaneKey key = Key();
  std::vector<StoreWrite> before, batch;
  int turns = 0;
  for (const std::vector<Rec>& state : stored) {
    for (std::vector<Rec> set : sets) {
      std::sort(set.begin(), set.end());
      do {
        const std::string id = absl::StrCat("t", turns++);
        for (Rec rec : state) before.push_back(Make(rec, key, id));
        for (Rec rec : set) batch.push_back(Make(rec, key, id));
      } while (std::next_permutation(set.begin(), set.end()));
    }
  }
  ASSERT_TRUE(merged->Write(before).ok());
  ASSERT_TRUE(merged->Write(batch).ok());
  for (const std::vector<StoreWrite>* writes : {&before, &batch}) {
    for (const StoreWrite& write : *writes) {
      ASSERT_TRUE(single->Write({write}).ok());
    }
  }
  merged.reset();
  single.reset();
  const std::string turn_rows = DumpRows(single_options.path, "turns", "id");
  EXPECT_EQ(std::count(turn_rows.begin(), turn_rows.end(), '\n'), turns);
  EXPECT_EQ(DumpStore(merged_options.path), DumpStore(single_options.path));
}

// The cases the merge introduces, with their stored values spelled out.
TEST_F(StoreTest, AWholeTurnInOneBatchIsStoredAsItsRecordsSay) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  // Bare snapshot, usage, pending then final verdict, a retried snapshot
  // and usage: one merged turn.
  ASSERT_TRUE(
      store
          ->Write({Make(Rec::kBare, key, "r1"), Make(Rec::kUsage, key, "r1"),
                   Make(Rec::kPending, key, "r1"), Make(Rec::kFinal, key, "r1"),
                   Make(Rec::kSnapshotRetry, key, "r1"),
                   Make(Rec::kUsageRetry, key, "r1")})
          .ok());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                     "provider = 'openai' AND model = 'gpt-5' AND "
                     "request_time_us = " +
                     absl::StrCat(kT0 + kSecond) +
                     " AND snapshot_received = 1 AND usage_received = 1 AND "
                     "tool_count = 3 AND cache_read_tokens = 40000 AND "
                     "verdict = 'ok' AND expected_reuse_tokens = 40000 AND "
                     "expected_drop = 'compaction'"),
            1);
  // Usage and break only, then the snapshot: the snapshot's values win.
  ASSERT_TRUE(
      store->Write({Make(Rec::kUsage, key, "r2"), Make(Rec::kBreak, key, "r2")})
          .ok());
  ASSERT_TRUE(store->Write({Make(Rec::kFull, key, "r2")}).ok());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r2' AND "
                     "provider = 'anthropic' AND request_time_us = " +
                     absl::StrCat(kT0) +
                     " AND verdict = 'break' AND expected_drop = 'resumed'"),
            1);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
  // A final verdict already stored: a whole turn with a break changes it
  // not, and adds no break row.
  ASSERT_TRUE(store->Write({Make(Rec::kFinal, key, "r3")}).ok());
  ASSERT_TRUE(
      store
          ->Write({Make(Rec::kFull, key, "r3"), Make(Rec::kUsage, key, "r3"),
                   Make(Rec::kBreak, key, "r3")})
          .ok());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r3' AND "
                     "verdict = 'ok' AND break_id IS NULL AND "
                     "snapshot_received = 1 AND usage_received = 1"),
            1);
  EXPECT_EQ(CountRows("prompt_cache_breaks"), 1);
  // A pending verdict stored: another pending one with the usage leaves it.
  ASSERT_TRUE(store->Write({Make(Rec::kStoredPending, key, "r4")}).ok());
  ASSERT_TRUE(store
                  ->Write({Make(Rec::kUsage, key, "r4"),
                           Make(Rec::kPending, key, "r4")})
                  .ok());
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_id = 'r4' AND "
                     "verdict = 'pending' AND expected_reuse_tokens = 7 AND "
                     "expected_drop IS NULL AND usage_received = 1"),
            1);
  EXPECT_EQ(CountRows("turns"), 4);
}

// The connection remembers which lists are stored and skips their upsert;
// a list retention deleted is stored again by the next snapshot sending it.
class ToolListRetentionTest : public StoreTest {
 protected:
  // `writer` stores two turns of one list; `retention` deletes them and the
  // list; `writer`'s next turn with that list must store it again, so that
  // no turn references a missing list. With `writer_retains_first`, the
  // writer's own retention commits between the deletion and that turn,
  // deleting nothing.
  void DeleteThenWriteAgain(SqliteStore& writer, SqliteStore& retention,
                            bool writer_retains_first = false) {
    const LaneKey key = Key();
    auto write = [&](const std::string& request_id, int64_t time_us) {
      return writer.Write(
          {SnapshotWrite{key, std::make_shared<const v1::Snapshot>(
                                  FullSnapshot(key, request_id, time_us))}});
    };
    ASSERT_TRUE(write("r0", kT0).ok());
    ASSERT_TRUE(write("r1", kT0 + kSecond).ok());  // The list is known now.
    absl::StatusOr<int64_t> deleted =
        retention.DeleteOlderThan(kT0 + 2 * kSecond);
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    ASSERT_EQ(CountRows("tool_lists"), 0);
    // The writer does not enforce foreign keys, so no cascade: retention
    // deletes a list's entries itself.
    ASSERT_EQ(CountRows("tool_list_entries"), 0);
    if (writer_retains_first) {
      deleted = writer.DeleteOlderThan(kT0);
      ASSERT_TRUE(deleted.ok()) << deleted.status();
      ASSERT_EQ(*deleted, 0);
    }

    ASSERT_TRUE(write("r2", kT0 + 3 * kSecond).ok());
    EXPECT_EQ(CountRows("turns"), 1);
    EXPECT_EQ(CountRows("tool_lists"), 1);
    EXPECT_EQ(CountRows("tool_list_entries"), 3);
    EXPECT_EQ(QueryInt("SELECT count(*) FROM pragma_foreign_key_check"), 0);
  }

  // DeleteThenWriteAgain with the retention done by a second store on the
  // same file.
  void DeleteWithAnotherWriterThenWriteAgain(bool writer_retains_first) {
    std::unique_ptr<SqliteStore> first = OpenStore();
    std::unique_ptr<SqliteStore> second = OpenStore();
    ASSERT_NE(first, nullptr);
    ASSERT_NE(second, nullptr);
    DeleteThenWriteAgain(*first, *second, writer_retains_first);
  }
};

TEST_F(ToolListRetentionTest, AToolListRetentionDeletedIsStoredAgain) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeleteThenWriteAgain(*store, *store);
}

// Another writer on the file (a second daemon is refused at start, an
// sqlite3 shell is not): the list the first store remembers as stored was
// deleted by the second's retention.
TEST_F(ToolListRetentionTest,
       AToolListAnotherWritersRetentionDeletedIsStoredAgain) {
  DeleteWithAnotherWriterThenWriteAgain(/*writer_retains_first=*/false);
}

// The same, with the first's retention committing in between: its commit
// must not hide the second's from the first's next transaction.
TEST_F(ToolListRetentionTest,
       AToolListAnotherWritersRetentionDeletedIsStoredAgainAfterOwnRetention) {
  DeleteWithAnotherWriterThenWriteAgain(/*writer_retains_first=*/true);
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
  const auto start = std::chrono::steady_clock::now();
  const int failures =
      WriteLanesConcurrently(*store, kThreads, kWritesPerThread);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  constexpr int kWrites = kThreads * kWritesPerThread;
  EXPECT_EQ(failures, 0);
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

// A turn stored without a request time (a snapshot that had none, or a
// verdict alone: PostgreSQL's partitions need one, so this is SQLite's case)
// takes its usage's response time when the usage comes in a later commit,
// and only the first usage's.
TEST_F(StoreTest, ALaterUsageFillsAMissingRequestTime) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  v1::Snapshot timeless = FullSnapshot(key, "r0", kT0);
  timeless.clear_request_time();
  ASSERT_TRUE(store
                  ->Write({SnapshotWrite{
                      key, std::make_shared<const v1::Snapshot>(timeless)}})
                  .ok());
  ASSERT_TRUE(store->Write({Classified(key, "r1", v1::VERDICT_PENDING)}).ok());
  EXPECT_EQ(
      QueryInt("SELECT count(*) FROM turns WHERE request_time_us IS NULL"), 2);
  for (const char* id : {"r0", "r1"}) {
    ASSERT_TRUE(
        store->Write({MakeUsage(key, id, kT0 + 5 * kSecond, Usage(1, 2, 3))})
            .ok());
    ASSERT_TRUE(
        store->Write({MakeUsage(key, id, kT0 + 9 * kSecond, Usage(4, 5, 6))})
            .ok());
  }
  EXPECT_EQ(QueryInt("SELECT count(*) FROM turns WHERE request_time_us = " +
                     std::to_string(kT0 + 5 * kSecond) +
                     " AND response_time_us = request_time_us"),
            2);
}

// How many index entries `sql` deletes when its conflict clause updates a
// row: the OP_IdxDelete instructions of its program on the store's schema.
int IndexDeletes(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string explain = absl::StrCat("EXPLAIN ", sql);
  EXPECT_EQ(sqlite3_prepare_v2(db, explain.c_str(), -1, &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  int deletes = 0;
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* opcode =
        reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
    if (std::string(opcode) == "IdxDelete") ++deletes;
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return deletes;
}

// A turn's usage and verdict after its snapshot, the usual split of a turn
// over two commits, rewrite its row and none of turns' indexes (kUpsertTurn
// rewrites the three on its request time and tool list, even unchanged).
TEST_F(StoreTest, AnUpsertWithoutSnapshotRewritesNoIndex) {
  OpenStore().reset();
  EXPECT_EQ(IndexDeletes(path_, kUpsertTurnWithoutSnapshot), 0);
  EXPECT_EQ(IndexDeletes(path_, kUpsertTurn), 3);
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

// Waits (30 s at most) until `checkpointer` has run more than `runs`
// checkpoints.
void WaitForCheckpoints(const Checkpointer& checkpointer, int64_t runs) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (checkpointer.stats().checkpoints <= runs &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(checkpointer.stats().checkpoints, runs);
}

// A checkpoint is asked for once per threshold pages the WAL grew, not
// after every commit that finds the WAL past the threshold (under steady
// commits a PASSIVE checkpoint never empties it, and that ran one checkpoint
// per commit).
TEST_F(StoreTest, CheckpointerAsksOncePerThresholdOfWalGrowth) {
  std::unique_ptr<SqliteStore> store = OpenStore();  // Creates the file.
  CheckpointerOptions options;
  options.threshold_pages = 100;
  options.restart_pages = options.fallback_pages = 1 << 30;
  absl::StatusOr<std::unique_ptr<Checkpointer>> checkpointer =
      Checkpointer::Open(path_, options);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status();
  Checkpointer& c = **checkpointer;
  constexpr CommitCheckpoint kAsked = CommitCheckpoint::kAskedCheckpointer;
  constexpr CommitCheckpoint kNone = CommitCheckpoint::kNone;
  EXPECT_EQ(c.AfterCommit(99), kNone);
  EXPECT_EQ(c.AfterCommit(100), kAsked);
  EXPECT_EQ(c.AfterCommit(101), kNone);
  EXPECT_EQ(c.AfterCommit(199), kNone);
  EXPECT_EQ(c.AfterCommit(205), kAsked);
  EXPECT_EQ(c.AfterCommit(304), kNone);
  // Fewer pages than when last asked: the WAL restarted from its beginning.
  EXPECT_EQ(c.AfterCommit(6), kNone);
  EXPECT_EQ(c.AfterCommit(100), kAsked);
  WaitForCheckpoints(c, 0);
}

// After each of the checkpointer's runs, the next commit is told to
// checkpoint the WAL itself when the WAL holds restart_pages or more and the
// run left at most tail_pages of it uncopied; at fallback_pages, whenever no
// run is under way.
TEST_F(StoreTest, ACommitAfterTheCheckpointersRunCheckpointsASmallTail) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  for (int i = 0; i < 100; ++i) {  // At least a WAL frame each.
    ASSERT_TRUE(
        store->Write({Classified(Key(), absl::StrCat("r", i), v1::VERDICT_OK)})
            .ok());
  }
  // The WAL's frames, all copied now; the runs below report the same.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &stmt,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  const int frames = sqlite3_column_int(stmt, 1);
  EXPECT_EQ(sqlite3_column_int(stmt, 2), frames);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  ASSERT_GE(frames, 100);

  // A checkpointer that has run once on this WAL (the commit at `frames`
  // pages asked for it).
  auto ran_once = [&](int restart_pages) {
    CheckpointerOptions options;
    options.threshold_pages = 100;
    options.restart_pages = restart_pages;
    options.tail_pages = 50;
    options.fallback_pages = 1 << 30;
    absl::StatusOr<std::unique_ptr<Checkpointer>> c =
        Checkpointer::Open(path_, options);
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->AfterCommit(frames), CommitCheckpoint::kAskedCheckpointer);
    WaitForCheckpoints(**c, 0);
    return *std::move(c);
  };
  std::unique_ptr<Checkpointer> c = ran_once(0);
  EXPECT_EQ(c->AfterCommit(frames + 10), CommitCheckpoint::kTail);
  // Once per run.
  EXPECT_NE(c->AfterCommit(frames + 20), CommitCheckpoint::kTail);
  EXPECT_EQ(ran_once(0)->AfterCommit(frames + 50), CommitCheckpoint::kTail);
  // More than tail_pages left.
  EXPECT_NE(ran_once(0)->AfterCommit(frames + 51), CommitCheckpoint::kTail);
  // Fewer than restart_pages in the WAL.
  EXPECT_NE(ran_once(frames + 10)->AfterCommit(frames + 9),
            CommitCheckpoint::kTail);
  // Fewer pages than the run saw: the WAL restarted since.
  EXPECT_NE(ran_once(0)->AfterCommit(frames - 1), CommitCheckpoint::kTail);

  CheckpointerOptions options;
  options.fallback_pages = 5000;
  absl::StatusOr<std::unique_ptr<Checkpointer>> fallback =
      Checkpointer::Open(path_, options);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ((*fallback)->AfterCommit(4999),
            CommitCheckpoint::kAskedCheckpointer);
  WaitForCheckpoints(**fallback, 0);  // Not while that run is under way.
  EXPECT_EQ((*fallback)->AfterCommit(5000), CommitCheckpoint::kFallback);
}

// Commits one record at a time until `done` (60 s at most).
void CommitUntil(SqliteStore& store, const std::function<bool()>& done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; !done(); ++i) {
    ASSERT_TRUE(
        store.Write({Classified(Key(), absl::StrCat("r", i), v1::VERDICT_OK)})
            .ok());
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  }
}

// Under steady commits, a commit checkpoints the tail after each of the
// checkpointer's runs once the WAL holds restart_pages, with no run beside
// it (one made it copy nothing, a third of the time), and the WAL restarts
// from its beginning, long before the fallback.
TEST_F(StoreTest, SteadyCommitsRestartTheWalBeforeItsFallback) {
  StoreOptions options = Options();
  options.checkpoints.threshold_pages = 100;
  options.checkpoints.restart_pages = 500;
  // Any tail: how much the commits add during a run is the machine's.
  options.checkpoints.tail_pages = 1 << 30;
  options.checkpoints.fallback_pages = 1 << 30;
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  // About 12,000 pages in all: 100 for each run, or more where commits
  // outpace the runs.
  CommitUntil(*store, [&] { return store->stats().checkpoints >= 120; });
  const CheckpointerStats stats = store->checkpointer_stats();
  // The WAL restarts after a tail's checkpoint, or after a run that copied
  // all of it (commits slower than runs): about once per five runs (500
  // pages, one asked for each 100); half that leaves room for a loaded
  // machine.
  EXPECT_GE(stats.wal_restarts, 120 / 10);
  EXPECT_GT(stats.commit_checkpoints, 0);
  EXPECT_EQ(stats.busy_commit_checkpoints, 0);
  // A tail's checkpoint copies the WAL whole (nothing reads beside), and the
  // next commit restarts it.
  EXPECT_GE(stats.wal_restarts, stats.commit_checkpoints - 1);
}

// A commit that finds the WAL at fallback_pages checkpoints it with no run
// beside (one would make it copy nothing, and the WAL grow on past the
// fallback), and the WAL restarts.
TEST_F(StoreTest, FallbackCheckpointsHaveNoRunBeside) {
  StoreOptions options = Options();
  options.checkpoints.threshold_pages = 100;
  options.checkpoints.restart_pages = 1 << 30;  // No tails.
  options.checkpoints.fallback_pages = 300;
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  CommitUntil(*store, [&] {
    return store->checkpointer_stats().commit_checkpoints >= 20;
  });
  const CheckpointerStats stats = store->checkpointer_stats();
  EXPECT_EQ(stats.busy_commit_checkpoints, 0);
  EXPECT_GE(stats.wal_restarts, stats.commit_checkpoints - 1);
}

// With a run asked for after every commit, the runs would follow each other
// with no moment between them for a commit's own checkpoint: the next run
// waits for the commit that sees the last one's figures, and the WAL
// restarts at the fallback.
TEST_F(StoreTest, BackToBackRunsLeaveTheFallbackItsCommit) {
  StoreOptions options = Options();
  options.checkpoints.threshold_pages = 1;
  options.checkpoints.restart_pages = 1 << 30;  // No tails.
  options.checkpoints.fallback_pages = 300;
  std::unique_ptr<SqliteStore> store = OpenStore(options);
  for (int i = 0; i < 4000; ++i) {
    ASSERT_TRUE(
        store->Write({Classified(Key(), absl::StrCat("r", i), v1::VERDICT_OK)})
            .ok());
  }
  const CheckpointerStats stats = store->checkpointer_stats();
  // About 18,000 pages, 60 times the fallback: the WAL restarted at it
  // after most runs (with no wait, never: 0 or 1 restarts, and the WAL grew
  // to 22,000 pages).
  EXPECT_GE(stats.wal_restarts, 5);
  EXPECT_EQ(stats.busy_commit_checkpoints, 0);
}

TEST_F(StoreTest, OpenFailsInAMissingDirectory) {
  StoreOptions options = Options();
  options.path = dir_ + "/missing/cachewatch.db";
  EXPECT_TRUE(absl::IsUnavailable(SqliteStore::Open(options).status()));
}

}  // namespace
}  // namespace cachewatch::testing
