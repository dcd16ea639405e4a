#include "daemon/store/sqlite/sqlite_handle.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

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

}  // namespace
}  // namespace cachewatch
