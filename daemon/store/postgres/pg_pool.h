// PgPool: a fixed number of connections to one PostgreSQL server, handed out
// one caller at a time. A connection found lost is replaced on the next
// Acquire(); while the server cannot be reached, connection attempts back
// off exponentially (100 ms doubling to 1 s) and Acquire() answers
// Unavailable at once in between, so a down server costs callers nothing.
// AcquireNow() is for health probes, which must tell whether the server can
// be reached now: it attempts the connection even while backing off.
//
// Thread-safe.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_POOL_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_POOL_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/postgres/pg_connection.h"

namespace cachewatch {

class PgPool {
 public:
  // A connection lent to one caller; returned to the pool when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(other.pool_), connection_(std::move(other.connection_)) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    PgConnection& operator*() const { return *connection_; }
    PgConnection* operator->() const { return connection_.get(); }

   private:
    friend class PgPool;
    Lease(PgPool* pool, std::unique_ptr<PgConnection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    PgPool* pool_;
    std::unique_ptr<PgConnection> connection_;
  };

  // `setup` runs on every new connection (session settings).
  PgPool(std::string conninfo, size_t size, std::chrono::milliseconds timeout,
         std::function<absl::Status(PgConnection&)> setup);

  // Waits for a free connection, connecting it when needed. Unavailable
  // when the server cannot be reached (or is backing off).
  absl::StatusOr<Lease> Acquire();

  // Like Acquire(), but a missing connection is attempted even while the
  // pool is backing off (its outcome ends or extends the backoff as any
  // attempt does): a server back since the last failed attempt is found at
  // once, not up to a backoff later. For callers that rate-limit themselves
  // (a prober, a health check each second).
  absl::StatusOr<Lease> AcquireNow();

  // True while the last connection attempt failed (until one succeeds).
  bool backing_off() const;

  // The number of connections the pool holds at most.
  size_t size() const { return size_; }

 private:
  absl::StatusOr<Lease> Acquire(bool honor_backoff);
  void Release(std::unique_ptr<PgConnection> connection);

  const std::string conninfo_;
  const size_t size_;
  const std::chrono::milliseconds timeout_;
  const std::function<absl::Status(PgConnection&)> setup_;

  mutable std::mutex mu_;
  std::condition_variable released_;
  // Idle connections; null entries are slots without a connection.
  std::vector<std::unique_ptr<PgConnection>> idle_;       // Guarded by mu_.
  std::chrono::steady_clock::time_point next_attempt_{};  // Guarded by mu_.
  std::chrono::milliseconds backoff_{0};                  // Guarded by mu_.
  absl::Status last_error_;                               // Guarded by mu_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_POOL_H_
