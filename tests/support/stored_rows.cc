#include "tests/support/stored_rows.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

namespace cachewatch::testing {

std::vector<std::string> StoredRows(const std::string& db_path,
                                    const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  EXPECT_EQ(
      sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  while (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(statement, 0);
    rows.push_back(text ? reinterpret_cast<const char*>(text) : "NULL");
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

std::set<std::string> StoredRowSet(const std::string& db_path,
                                   const std::string& sql) {
  const std::vector<std::string> rows = StoredRows(db_path, sql);
  return std::set<std::string>(rows.begin(), rows.end());
}

}  // namespace cachewatch::testing
