// The store's schema, versioned by `PRAGMA user_version` and brought up to
// date by a numbered list of migrations (see schema.cc for the tables).
//
// Not thread-safe: runs on one connection at a time. Safe against another
// process migrating the same file at once (each migration takes the write
// lock and re-reads the version).
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_SCHEMA_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_SCHEMA_H_

#include "absl/status/status.h"
#include "daemon/store/sqlite/sqlite_handle.h"

namespace cachewatch {

// The schema version this build writes: the number of migrations.
int LatestSchemaVersion();

// FailedPrecondition when the file's schema is newer than this build knows;
// reads only, so a newer database is left untouched.
absl::Status CheckSchemaVersion(Database& db);

// Applies the missing migrations in order, each in its own transaction.
// FailedPrecondition as CheckSchemaVersion.
absl::Status Migrate(Database& db);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_SCHEMA_H_
