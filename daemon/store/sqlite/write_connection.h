// The store's write side: the one read-write connection, its prepared
// statements, and the SQL that applies a batch of StoreWrites (record.h) —
// each turn's records merged (daemon/store/turn_merge.h) and written by one
// upsert, or two for a turn without its snapshot —, deletes old rows and caps
// the file size.
//
// Not thread-safe: the SqliteStore serializes every call.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_CONNECTION_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/record.h"
#include "daemon/store/sqlite/sqlite_handle.h"
#include "daemon/store/turn_merge.h"

namespace cachewatch {

class WriteConnection {
 public:
  // Opens the database at `path`, creating it (mode 0600) when missing;
  // sets WAL, synchronous FULL or NORMAL and a busy timeout, foreign keys
  // not enforced (the connection keeps the references whole itself);
  // migrates the schema; prepares the statements. FailedPrecondition when
  // the file's schema is newer than this build's.
  static absl::StatusOr<std::unique_ptr<WriteConnection>> Open(
      const std::string& path, bool synchronous_full);

  WriteConnection(const WriteConnection&) = delete;
  WriteConnection& operator=(const WriteConnection&) = delete;

  // Applies every write of every unit in one transaction: all are committed
  // or none. `now_us` (the daemon's clock) fills received_at_us of new rows.
  // Unavailable when the database cannot be written right now.
  absl::Status Commit(const std::vector<const std::vector<StoreWrite>*>& units,
                      int64_t now_us);

  // In one transaction, deletes at most `limit` turns and at most `limit`
  // breaks with request_time_us < cutoff_us, then at most `limit` tool lists
  // no turn references. Returns the rows deleted (0 when nothing is left).
  absl::StatusOr<int64_t> DeleteOlderBatch(int64_t cutoff_us, int limit);

  // PRAGMA max_page_count: caps the file at `pages` pages, so that writes
  // needing more fail as on a full disk.
  absl::Status SetMaxPageCount(int64_t pages);

  // Whether a commit could succeed now, without changing anything: OK, or
  // Unavailable naming the reason (the file at its size cap or its file
  // system full, each with less than `headroom_bytes` left; the database
  // read-only or failing). `path` is the database file.
  absl::Status ProbeWritable(const std::string& path, int64_t headroom_bytes);

  // Database::HandOffCheckpoints on this connection.
  void HandOffCheckpoints(std::function<bool(int wal_pages)> after_commit,
                          std::function<void(bool busy)> checkpointed);

 private:
  explicit WriteConnection(Database db) : db_(std::move(db)) {}
  absl::Status PrepareStatements();
  // Commit()'s transaction.
  absl::Status ApplyInTransaction(
      const std::vector<const std::vector<StoreWrite>*>& units, int64_t now_us);

  // A merged turn's records (`list_hash`: its snapshot's tool list), its
  // break's classification after the others; `took_break` says whether the
  // turn took that break (then its break row is to be added).
  absl::Status ApplyTurn(const MergedTurn& turn, const std::string& list_hash,
                         int64_t now_us, bool& took_break);
  // A break's classification alone (kUpsertClassification); `took` says
  // whether the turn took it.
  absl::Status ApplyBreak(const ClassificationWrite& write, int64_t now_us,
                          bool& took);
  // After each BEGIN: forgets the stored tool lists unless the data
  // version is still the one after this connection's last commit (another
  // connection committed since, or either version is unknown: reading it
  // failed, which never fails a transaction).
  void ForgetToolListsIfOthersCommitted();
  // After each of this connection's commits.
  void RememberDataVersion();
  absl::Status InternToolList(const std::string& list_hash,
                              const v1::Snapshot& snapshot);
  absl::Status InsertBreak(const LaneKey& key,
                           const v1::PromptCacheBreak& event);

  Database db_;
  // Prepared once, reused for every write; declared after db_ so they are
  // finalized before it closes.
  Statement insert_tool_list_;
  Statement insert_tool_entry_;
  Statement upsert_turn_;
  Statement upsert_turn_without_snapshot_;
  Statement fill_turn_request_time_;
  Statement upsert_classification_;
  Statement insert_break_;
  Statement delete_turns_;
  Statement delete_breaks_;
  Statement delete_tool_lists_;
  Statement delete_tool_entries_;
  // The tool lists known to be stored (by list hash), so that a snapshot
  // whose list is among them skips the tool_lists upsert: the lists this
  // connection committed or found stored. Forgotten whenever a commit fails,
  // retention deletes a list or another connection committed (its retention
  // may have deleted one); at most kMaxKnownToolLists are kept.
  static constexpr size_t kMaxKnownToolLists = 4096;
  std::unordered_set<std::string> stored_tool_lists_;
  // The file's data version right after this connection's last commit.
  std::optional<uint32_t> data_version_after_commit_;
  // Lists interned by the open transaction, known once it commits.
  std::vector<std::string> interned_tool_lists_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_WRITE_CONNECTION_H_
