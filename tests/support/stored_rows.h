// Test support: reads rows back from a daemon's SQLite file, on a read-only
// connection of its own (the daemon may be running or stopped), to check
// what it stored.
//
// A failure to open the file or to prepare the query fails the calling test
// (a non-fatal gtest failure) and yields no rows. Thread-safe.
#ifndef CACHEWATCH_TESTS_SUPPORT_STORED_ROWS_H_
#define CACHEWATCH_TESTS_SUPPORT_STORED_ROWS_H_

#include <set>
#include <string>
#include <vector>

namespace cachewatch::testing {

// The first column of every row `sql` returns from the database at
// `db_path`, as text in row order ("NULL" for a null).
std::vector<std::string> StoredRows(const std::string& db_path,
                                    const std::string& sql);

// The same values as a set, for comparing what was stored with what was
// acknowledged regardless of order.
std::set<std::string> StoredRowSet(const std::string& db_path,
                                   const std::string& sql);

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_STORED_ROWS_H_
