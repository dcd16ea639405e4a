// The PostgreSQL schema: the same tables, columns and column layouts as the
// SQLite store (daemon/store/schema.cc, docs/SQL.md), so postmortem SQL reads
// both, with these differences:
//   - turns and prompt_cache_breaks are partitioned by day (declarative range
//     partitions on request_time_us, UTC days) so that retention drops whole
//     partitions; partitions are named <table>_pYYYYMMDD and created on
//     demand, before the first row of their day is written;
//   - turns.request_time_us is never NULL (a partition key cannot be): a turn
//     known only by its classification takes the daemon's clock;
//   - unique keys include the partition key (PostgreSQL requires it):
//     (agent, session_id, lane, request_id, request_time_us) and
//     (break_id, request_time_us); PostgresStore keeps a turn to one row by
//     looking its key up before inserting, under the lane's advisory lock.
//   - the version lives in the table cachewatch_schema_migrations (one row
//     per migration applied), not in PRAGMA user_version.
//
// Thread-safe: free functions over a connection the caller owns.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_SCHEMA_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_SCHEMA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/postgres/pg_connection.h"

namespace cachewatch {

inline constexpr int64_t kPgDayUs = 86'400'000'000;

int PgLatestSchemaVersion();

// The schema version of the database (0 when never migrated).
absl::StatusOr<int> PgSchemaVersion(PgConnection& connection);

// Applies every migration the database lacks, each in a transaction, under
// an advisory lock (several daemons may start at once). FailedPrecondition
// when the database is newer than this build.
absl::Status PgMigrate(PgConnection& connection);

// The UTC day (days since the epoch) of a time in microseconds.
int64_t PgDayOf(int64_t time_us);

// Creates the partitions of `days` (days since the epoch) of both tables
// where missing, under an advisory lock, in one transaction.
absl::Status PgCreatePartitions(PgConnection& connection,
                                const std::vector<int64_t>& days);

// A partition of one of the partitioned tables.
struct PgPartition {
  std::string table;  // "turns" or "prompt_cache_breaks".
  std::string name;   // "turns_p20260921".
  int64_t day = 0;    // Days since the epoch.
};

// Every partition of both tables, oldest first.
absl::StatusOr<std::vector<PgPartition>> PgListPartitions(
    PgConnection& connection);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_SCHEMA_H_
