// The store's read side: a query-only connection, its prepared statements,
// and the queries behind SqliteStore's read methods (their contracts are in
// record_store.h and break_queries.h). In WAL mode it reads while the writer
// writes.
//
// Not thread-safe: the SqliteStore serializes every call.
#ifndef CACHEWATCH_DAEMON_STORE_SQLITE_READ_CONNECTION_H_
#define CACHEWATCH_DAEMON_STORE_SQLITE_READ_CONNECTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/record.h"
#include "daemon/store/sqlite/sqlite_handle.h"

namespace cachewatch {

class ReadConnection {
 public:
  // Opens the existing, migrated database at `path`.
  static absl::StatusOr<std::unique_ptr<ReadConnection>> Open(
      const std::string& path);

  ReadConnection(const ReadConnection&) = delete;
  ReadConnection& operator=(const ReadConnection&) = delete;

  absl::StatusOr<v1::ListBreaksResponse> ListBreaks(
      const v1::ListBreaksRequest& request);
  absl::StatusOr<v1::ExplainBreakResponse> ExplainBreak(
      const std::string& break_id);
  absl::StatusOr<v1::GetLaneTimelineResponse> LaneTimeline(const LaneKey& key,
                                                           int limit);
  absl::StatusOr<std::optional<v1::TurnClassification>> FindClassification(
      const LaneKey& key, const std::string& request_id);
  absl::StatusOr<std::vector<RestoredLane>> LoadRecentLanes(int64_t since_us);
  absl::StatusOr<std::optional<RestoredLane>> LoadLane(
      const LaneKey& key, const LaneLookup& lookup);

 private:
  class ToolListCache;

  explicit ReadConnection(Database db) : db_(std::move(db)) {}
  absl::Status PrepareStatements();
  // The ListBreaks statement for one combination of filters (a bit set),
  // prepared on first use.
  absl::StatusOr<Statement*> ListBreaksStatement(unsigned filters);
  // The snapshot of turn (key, request_id), or null when there is none.
  absl::StatusOr<std::shared_ptr<const v1::Snapshot>> FindSnapshot(
      const LaneKey& key, const std::string& request_id, ToolListCache& tools);

  Database db_;
  // Declared after db_ so they are finalized before it closes.
  Statement select_break_;
  Statement select_turn_;
  Statement select_tool_entries_;
  Statement select_timeline_;
  Statement select_classification_;
  Statement select_recent_lanes_;
  Statement select_lane_;
  Statement select_lane_ttl_;
  std::map<unsigned, Statement> list_breaks_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_SQLITE_READ_CONNECTION_H_
