// BreakQueries: the read side behind the ListBreaks, ExplainBreak and
// GetLaneTimeline RPCs (and any other receiver's queries). SqliteStore
// (daemon/store/sqlite/sqlite_store.h) implements it next to RecordStore.
//
// Every query sees every write whose RecordStore::Write() has returned. A
// lane key whose lane is empty means lane "main".
//
// Thread-safety: every method may be called concurrently from any number of
// threads without external synchronization.
#ifndef CACHEWATCH_DAEMON_STORE_BREAK_QUERIES_H_
#define CACHEWATCH_DAEMON_STORE_BREAK_QUERIES_H_

#include <string>

#include "absl/status/statusor.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/core/turn.h"

namespace cachewatch {

class BreakQueries {
 public:
  virtual ~BreakQueries() = default;

  // Breaks matching every filter of `request`, newest first (by request
  // time, then break id), one page at a time: page_size defaults to 100 and
  // is capped at 1000; next_page_token is empty on the last page.
  // InvalidArgument for a negative page size or a bad page token.
  virtual absl::StatusOr<v1::ListBreaksResponse> ListBreaks(
      const v1::ListBreaksRequest& request) = 0;

  // The break and the two snapshots it compares (each absent when never
  // received), rebuilt from the stored turns. NotFound for an unknown id.
  virtual absl::StatusOr<v1::ExplainBreakResponse> ExplainBreak(
      const std::string& break_id) = 0;

  // The lane's most recent `limit` turns (default 200 when <= 0, at most
  // 5000), oldest first.
  virtual absl::StatusOr<v1::GetLaneTimelineResponse> LaneTimeline(
      const LaneKey& key, int limit) = 0;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_BREAK_QUERIES_H_
