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

}  // namespace
}  // namespace cachewatch
