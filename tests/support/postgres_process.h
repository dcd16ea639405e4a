// Test support: a real PostgreSQL 15 server (Debian's postgresql-15) run by
// the test itself in a fresh temporary directory: initdb, then pg_ctl, on
// a free loopback TCP port, trust authentication, fsync off (a test server
// need only survive a process crash, not a power loss). PostgreSQL refuses
// to run as root: when the test runs as root (CI), the server runs as the
// system user "cachewatch-test" (created with useradd when missing) through
// runuser.
//
// Binaries come from $CACHEWATCH_PG_BINDIR, else /usr/lib/postgresql/15/bin;
// Available() tells whether they are there (tests GTEST_SKIP otherwise).
// For debugging: $CACHEWATCH_PG_OPTIONS adds server options ("-c
// log_min_duration_statement=0"); with $CACHEWATCH_KEEP_TMP set, the
// directory (data and server.log) is kept.
//
// Not thread-safe; one test thread drives it.
#ifndef CACHEWATCH_TESTS_SUPPORT_POSTGRES_PROCESS_H_
#define CACHEWATCH_TESTS_SUPPORT_POSTGRES_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

namespace cachewatch::testing {

class PostgresProcess {
 public:
  // The directory of the server's binaries, "" when PostgreSQL is absent.
  static std::string BinDir();
  static bool Available() { return !BinDir().empty(); }
  // Why Available() is false, for GTEST_SKIP.
  static std::string SkipReason();

  // initdb and start; null (with the reason on stderr) on failure.
  static std::unique_ptr<PostgresProcess> Start();

  PostgresProcess(const PostgresProcess&) = delete;
  PostgresProcess& operator=(const PostgresProcess&) = delete;
  // Stops the server (immediate) and removes its directory.
  ~PostgresProcess();

  // A postgresql:// URL of database `database` on this server.
  std::string Url(const std::string& database) const;
  // Creates an empty database; false on failure.
  bool CreateDatabase(const std::string& database);
  // Runs `sql` in `database` with psql; returns its unaligned, tuples-only
  // output ("" and the error on stderr when it fails).
  std::string Psql(const std::string& database, const std::string& sql);

  // Stops the server: "fast" (clean shutdown, clients disconnected) or
  // "immediate" (no checkpoint: recovery on the next start, like a crash).
  bool Stop(const std::string& mode = "fast");
  // Starts it again on the same port and data.
  bool Restart();

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

 private:
  PostgresProcess() = default;
  // Runs a PostgreSQL binary as the server's user; returns its exit status.
  int Run(const std::string& binary, const std::vector<std::string>& args,
          std::string* output = nullptr) const;

  std::string dir_;
  int port_ = 0;
  bool running_ = false;
};

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_POSTGRES_PROCESS_H_
