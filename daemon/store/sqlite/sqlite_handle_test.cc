#include "daemon/store/sqlite/sqlite_handle.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "daemon/util/temp_dir.h"

namespace cachewatch {
namespace {

// An in-memory database (":memory:" is SQLite's, never a file).
Database Memory() {
  absl::StatusOr<Database> db = Database::Open(":memory:", /*create=*/false);
  EXPECT_TRUE(db.ok()) << db.status();
  return *std::move(db);
}

TEST(StatementTest, BindsEachParameterByName) {
  Database db = Memory();
  absl::StatusOr<Statement> select = db.Prepare("SELECT :b, :a, :b || :c, ?5");
  ASSERT_TRUE(select.ok()) << select.status();
  select->BindText(":a", "first");
  select->BindInt(":b", 2);  // Used twice: one parameter.
  select->BindText(":c", "x");
  absl::StatusOr<bool> row = select->Step();
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE(*row);
  EXPECT_EQ(select->Int(0), 2);
  EXPECT_EQ(select->Text(1), "first");
  EXPECT_EQ(select->Text(2), "2x");
  EXPECT_TRUE(select->IsNull(3));  // The nameless parameter, never bound.
}

TEST(StatementTest, AnUnknownNameFailsTheStepNamingIt) {
  Database db = Memory();
  absl::StatusOr<Statement> select = db.Prepare("SELECT :known");
  ASSERT_TRUE(select.ok()) << select.status();
  select->BindInt(":unknown", 1);
  const absl::StatusOr<bool> row = select->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find(":unknown"), std::string::npos)
      << row.status();
  // Reset clears the failure; the known name binds.
  select->Reset();
  select->BindInt(":known", 7);
  ASSERT_TRUE(select->Step().value_or(false));
  EXPECT_EQ(select->Int(0), 7);
}

TEST(StatementTest, AMovedStatementKeepsItsNames) {
  Database db = Memory();
  absl::StatusOr<Statement> prepared = db.Prepare("SELECT :value");
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  Statement moved(*std::move(prepared));
  Statement assigned;
  assigned = std::move(moved);
  assigned.BindDouble(":value", 0.5);
  ASSERT_TRUE(assigned.Step().value_or(false));
  EXPECT_EQ(assigned.Double(0), 0.5);
}

int64_t CountRows(Database& db) {
  absl::StatusOr<Statement> count = db.Prepare("SELECT count(*) FROM t");
  EXPECT_TRUE(count.ok()) << count.status();
  EXPECT_TRUE(count->Step().value_or(false));
  return count->Int(0);
}

// Begin, Commit and the destructor's rollback run kept statements
// (Database::ExecKept), over and over on one connection.
TEST(TransactionTest, CommitsAndRollsBackThroughKeptStatements) {
  Database db = Memory();
  ASSERT_TRUE(db.Exec("CREATE TABLE t (x INTEGER)").ok());
  for (int round = 0; round < 3; ++round) {
    {
      Transaction committed(db);
      ASSERT_TRUE(committed.Begin("BEGIN IMMEDIATE").ok());
      ASSERT_TRUE(db.Exec("INSERT INTO t VALUES (1)").ok());
      ASSERT_TRUE(committed.Commit().ok());
    }
    {
      Transaction abandoned(db);
      ASSERT_TRUE(abandoned.Begin("BEGIN IMMEDIATE").ok());
      ASSERT_TRUE(db.Exec("INSERT INTO t VALUES (2)").ok());
    }  // Rolled back.
    EXPECT_FALSE(db.InTransaction());
    EXPECT_EQ(CountRows(db), round + 1);
  }
}

TEST(TransactionTest, AKeptStatementsFailureNamesItAndTheNextRunWorks) {
  Database db = Memory();
  ASSERT_TRUE(db.Exec("CREATE TABLE t (x INTEGER)").ok());
  Transaction outer(db);
  ASSERT_TRUE(outer.Begin("BEGIN").ok());
  const absl::Status nested = db.ExecKept("BEGIN");
  EXPECT_FALSE(nested.ok());
  EXPECT_NE(nested.message().find("BEGIN"), std::string::npos) << nested;
  EXPECT_NE(nested.message().find("within a transaction"), std::string::npos)
      << nested;
  ASSERT_TRUE(db.Exec("INSERT INTO t VALUES (1)").ok());
  ASSERT_TRUE(outer.Commit().ok());
  EXPECT_EQ(CountRows(db), 1);
  // A moved connection keeps its kept statements working.
  Database moved(std::move(db));
  ASSERT_TRUE(moved.ExecKept("BEGIN").ok());
  ASSERT_TRUE(moved.ExecKept("ROLLBACK").ok());
  EXPECT_FALSE(moved.InTransaction());
}

// A file database in WAL mode with one table, `t`, in a fresh directory.
class WalTest : public ::testing::Test {
 protected:
  Database OpenFile() {
    absl::StatusOr<Database> db =
        Database::Open(dir_.File("wal.db"), /*create=*/true);
    EXPECT_TRUE(db.ok()) << db.status();
    EXPECT_TRUE(
        db->Exec("PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS t(x)")
            .ok());
    return *std::move(db);
  }

  // One commit of about four pages.
  static void Insert(Database& db) {
    ASSERT_TRUE(db.Exec("INSERT INTO t VALUES (randomblob(16000))").ok());
  }

  TempDir dir_;
};

// The hook sees each commit's WAL, and no commit checkpoints unless the hook
// says so (SQLite's automatic checkpoint, at 1000 pages, is replaced); one
// that does leaves the WAL copied whole, so the next commit starts it again
// from its beginning.
TEST_F(WalTest, ACommitCheckpointsOnlyWhenItsHookSaysSo) {
  Database db = OpenFile();
  std::vector<int> pages;
  bool checkpoint = false;
  std::vector<bool> checkpoints_busy;
  db.HandOffCheckpoints(
      [&](int wal_pages) {
        pages.push_back(wal_pages);
        return std::exchange(checkpoint, false);
      },
      [&](bool busy) { checkpoints_busy.push_back(busy); });
  while (pages.empty() || pages.back() < 1200) Insert(db);
  for (size_t i = 1; i < pages.size(); ++i) {
    ASSERT_GT(pages[i], pages[i - 1]) << "commit " << i;
  }
  EXPECT_TRUE(checkpoints_busy.empty());
  checkpoint = true;
  Insert(db);
  EXPECT_EQ(checkpoints_busy, std::vector<bool>{false});
  const int before = pages.back();
  Insert(db);
  EXPECT_LT(pages.back(), 10) << "after " << before;
}

// A checkpoint on a second connection reports the WAL's frames and those it
// copied; the database file's sync then succeeds.
TEST_F(WalTest, APassiveCheckpointReportsWhatItCopied) {
  Database writer = OpenFile();
  writer.HandOffCheckpoints([](int) { return false; }, [](bool) {});
  for (int i = 0; i < 20; ++i) Insert(writer);
  absl::StatusOr<Database> other =
      Database::Open(dir_.File("wal.db"), /*create=*/false);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<Database::CheckpointResult> result =
      other->CheckpointPassive();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->wal_frames, 20 * 4);
  EXPECT_EQ(result->checkpointed_frames, result->wal_frames);
  EXPECT_TRUE(other->SyncDatabaseFile().ok());
  // Nothing is left to copy.
  result = other->CheckpointPassive();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->checkpointed_frames, result->wal_frames);
}

// An in-memory database has no WAL and no file to sync.
TEST(DatabaseTest, AMemoryDatabaseHasNoFileToSync) {
  Database db = Memory();
  EXPECT_FALSE(db.SyncDatabaseFile().ok());
}

}  // namespace
}  // namespace cachewatch
