// PostgresStore: the durable store on a PostgreSQL server that several
// daemons may share (docs/FLEET.md). Same contract as the SQLite store
// (daemon/store/record_store.h): writes are group-committed (leader/
// follower, one transaction per batch: group_commit_queue.h) and Write()
// returns once its records are committed
// with synchronous_commit on; writes are idempotent per (lane key, request
// id, kind); queries see every write whose Write() has returned; the schema
// (pg_schema.h) has the SQLite store's tables and column names, so the
// postmortem SQL reads both.
//
// A batch is sent as one pipeline (one round trip) of prepared statements:
// BEGIN, the advisory locks of the batch's lanes (pg_advisory_xact_lock, in
// a fixed order, so two daemons writing the same lane serialize instead of
// interleaving), the lane claims, the tool lists this store has not stored
// before, one statement for all the batch's turns (pg_write_statements.h),
// one per break, COMMIT. Before it, the day partitions its records need are
// created when missing. A list another daemon's retention deleted since this
// store stored it fails the turns' foreign key: the batch is tried again with
// its lists (as a partition dropped meanwhile fails the turns' insert, and
// the batch is tried again with its partitions).
//
// A lane's state across daemons (docs/FLEET.md): every commit claims its
// lanes in lane_writers (writer id, a global sequence number) under their
// advisory locks, after checking that no other daemon wrote any of them
// since this store last read it (LoadLane notes the lane's write_seq as of
// its snapshot). When one did, the daemon's cached lane is stale: the write
// units touching it fail with StaleLanesError (ABORTED, daemon/store/
// stale_lanes.h) and nothing of them is stored; the rest of the batch
// commits. A lane never read through LoadLane is not checked.
//
// PostgreSQL unreachable: Write() answers Unavailable (nothing is
// acknowledged that was not committed; a commit whose answer was lost is
// safe to retry, writes being idempotent), stats() reports the store
// unhealthy (a prober checks the server every `probe_interval`), and writes
// succeed again once the server is back: lost connections are replaced,
// with exponential backoff between attempts (PgPool). The prober and
// ProbeWritable() connect regardless of that backoff: they answer for the
// server as it is now.
//
// Thread-safe: every method may be called concurrently.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_POSTGRES_STORE_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_POSTGRES_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/break_queries.h"
#include "daemon/store/group_commit_queue.h"
#include "daemon/store/postgres/pg_pool.h"
#include "daemon/store/record.h"
#include "daemon/store/record_store.h"

namespace cachewatch {

struct PostgresStoreOptions {
  // libpq connection string or URL: "postgresql://user@host:5432/db".
  std::string url;
  // Connections for queries (the writer has one of its own). Default 4.
  size_t query_connections = 4;
  // The statement timeout (the daemon's --store-timeout-ms): the server
  // cancels a statement running longer (statement_timeout; its transaction
  // rolls back and the Write() answers Unavailable naming the timeout), and
  // a round trip without an answer for this long plus kPgAnswerGrace treats
  // the server as unreachable. A 1000-record commit took 0.3-2.3 s on a
  // 2-core machine at load 11 (docs/FLEET.md). Default 10 s.
  std::chrono::milliseconds timeout{10000};
  // How often the prober checks the server. Default 1 s.
  std::chrono::milliseconds probe_interval{1000};
  // Group commit, as GroupCommitOptions. Defaults 0, 1000, 100,000.
  std::chrono::microseconds max_batch_delay{0};
  size_t max_batch_records = 1000;
  size_t max_queued_records = 100000;
  // For tests: called on the committing thread just before each
  // transaction with the number of records it holds. Default none.
  std::function<void(size_t records)> before_commit;
};

// A lane's advisory lock key, and its key in lane_writers claims.
int64_t PgLaneKey(const LaneKey& key);

// True for a --store value that names a PostgreSQL server
// ("postgres://..." or "postgresql://...").
bool IsPostgresUrl(std::string_view store);

// Sets up a connection as the store's writer connection is (durable
// commits, generic plans, and no sequential, bitmap or index-only scans: the
// turn lookup's plan is an index scan of turns_by_key_hash whatever the
// partitions' statistics). The store calls it on each writer connection;
// tests call it to see the writer's plans. Safe on any connection not in use
// by another thread.
absl::Status PgSetUpWriterSession(PgConnection& connection);

class PostgresStore final : public RecordStore, public BreakQueries {
 public:
  // Connects, migrates the schema and creates the partitions of yesterday
  // through the day after tomorrow. FailedPrecondition when the schema is
  // newer than this build knows; Unavailable when the server cannot be
  // reached.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(
      const PostgresStoreOptions& options);

  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;
  ~PostgresStore() override;

  // As Store::Write.
  absl::Status Write(std::vector<StoreWrite> writes) override;
  // Queues `writes` like Write() but returns without waiting for another
  // caller's commit; `done` is called on the thread that led their batch
  // (GroupCommitQueue::WriteAsync).
  void WriteAsync(std::vector<StoreWrite> writes, WriteDone done) override;

  absl::StatusOr<v1::ListBreaksResponse> ListBreaks(
      const v1::ListBreaksRequest& request) override;
  absl::StatusOr<v1::ExplainBreakResponse> ExplainBreak(
      const std::string& break_id) override;
  absl::StatusOr<v1::GetLaneTimelineResponse> LaneTimeline(const LaneKey& key,
                                                           int limit) override;
  absl::StatusOr<std::optional<v1::TurnClassification>> FindClassification(
      const LaneKey& key, const std::string& request_id) override;
  absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(
      int64_t since_us) override;
  // Reads the lane's newest rows through turns_by_lane_time in one
  // REPEATABLE READ snapshot on a query connection; a second read, of at
  // most 1000 rows, only when none of them showed a TTL.
  absl::StatusOr<std::optional<RestoredLane>> LoadLane(
      const LaneKey& key, const LaneLookup& lookup) override;

  // Retention: drops the day partitions wholly before cutoff_us, deletes
  // the older rows of the partition holding it (in small transactions),
  // then the tool lists no turn references; creates the partitions of the
  // next days ahead. Returns the rows deleted (turns, breaks, tool lists).
  absl::StatusOr<int64_t> DeleteOlderThan(int64_t cutoff_us) override;

  // OK, or Unavailable naming why not: the server unreachable, or unable
  // to start a read-write transaction (a standby, default_transaction_read_
  // only, out of transaction ids). One round trip on a query connection.
  absl::Status ProbeWritable() override;

  size_t queued_records() const override;
  StoreStats stats() const override;

 private:
  PostgresStore(const PostgresStoreOptions& options,
                std::unique_ptr<PgPool> writer,
                std::unique_ptr<PgPool> readers);

  // The queue's Committer: commits the batch on the writer connection, on
  // the leader's thread; units of stale lanes are refused (StaleLanesError).
  absl::Status CommitBatch(std::vector<GroupCommitQueue::Unit>& batch);
  // One attempt at committing `units` on the writer connection.
  // `claimed`: the batch's lanes in the order of their claim.
  absl::Status CommitUnits(
      const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us,
      std::vector<LaneKey>& claimed);
  // Notes lane_writers.write_seq of lane `lane` (PgLaneKey) as a lookup read
  // it; what the lane's next claim checks against.
  void NoteSeen(int64_t lane, int64_t write_seq);
  // What the claim of `lane` checks against: nullopt when unchecked.
  std::optional<int64_t> SeenFor(int64_t lane);
  // Whether a commit of this store stored tool list `hash` (the server may
  // have lost it since: a turn's foreign key tells, and the commit forgets).
  bool ToolListStored(const std::string& hash);
  void NoteToolListsStored(const std::vector<std::string>& hashes);
  void ForgetStoredToolLists();
  // Creates the partitions of `days` not known to exist.
  absl::Status EnsurePartitions(PgConnection& connection,
                                const std::vector<int64_t>& days);
  void ProbeLoop();

  const PostgresStoreOptions options_;
  const std::unique_ptr<PgPool> writer_;
  const std::unique_ptr<PgPool> readers_;

  // The prober's state. Held while taking the queue's lock (ProbeLoop),
  // never taken under it.
  mutable std::mutex probe_mu_;
  std::condition_variable probe_changed_;  // Notified when stopping_ is set.
  bool stopping_ = false;                  // Guarded by probe_mu_.
  // The prober's last answer (or a commit's): false while the server cannot
  // be reached.
  bool reachable_ = true;    // Guarded by probe_mu_.
  std::string probe_error_;  // Guarded by probe_mu_.

  // This store's id in lane_writers: random per Open.
  const std::string writer_id_;
  std::mutex seen_mu_;
  std::unordered_map<int64_t, int64_t> seen_;  // Guarded by seen_mu_.
  // seen_ outgrew its cap and was cleared: a lane missing from it is checked
  // against 0 (any other daemon's write counts).
  bool seen_overflowed_ = false;  // Guarded by seen_mu_.

  std::mutex partitions_mu_;
  std::set<int64_t> known_days_;  // Guarded by partitions_mu_.

  // Tool lists this store's commits stored, not inserted again.
  std::mutex tool_lists_mu_;
  std::unordered_set<std::string> stored_tool_lists_;  // By tool_lists_mu_.

  // After everything its commits use.
  GroupCommitQueue queue_;

  std::thread prober_;  // Last: started once everything else is set up.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_POSTGRES_STORE_H_
