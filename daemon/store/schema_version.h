// The rule both stores' migrations keep (daemon/store/sqlite/schema.cc,
// daemon/store/postgres/pg_schema.cc): a build migrates a database up to the
// newest schema it knows, and refuses one a newer build migrated past it.
// Each store keeps its own ledger of the version (SQLite's user_version, a
// PostgreSQL table) and its own SQL.
//
// A pure function of values; thread-safe.
#ifndef CACHEWATCH_DAEMON_STORE_SCHEMA_VERSION_H_
#define CACHEWATCH_DAEMON_STORE_SCHEMA_VERSION_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cachewatch {

// OK when a database at schema `version` can be used (and migrated) by a
// build whose newest schema is `latest`; FAILED_PRECONDITION naming both when
// it is newer.
inline absl::Status CheckSchemaVersionKnown(int version, int latest) {
  if (version > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", version, " is newer than this build's ",
        latest, ": use a newer cachewatchd"));
  }
  return absl::OkStatus();
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SCHEMA_VERSION_H_
