// Recorded traces: one JSON object per line, each the protobuf JSON mapping
// of a cachewatch.v1.RecordRequest ({"snapshot": {...}} or {"usage": {...}}).
// Blank lines are skipped. Records may be out of order, duplicated or lack
// their pair; that is for the reader of the trace to handle.
//
// Thread-safe: plain functions.
#ifndef CACHEWATCH_CLI_TRACE_H_
#define CACHEWATCH_CLI_TRACE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/service.pb.h"

namespace cachewatch::cli {

struct TraceRecord {
  int line = 0;  // 1-based line number in the file.
  v1::RecordRequest record;
};

struct TraceLineError {
  int line = 0;
  absl::Status status;
};

struct Trace {
  std::vector<TraceRecord> records;    // In file order.
  std::vector<TraceLineError> errors;  // Lines that are not a record.
};

// Parses one line. InvalidArgument when it is not JSON, not a
// RecordRequest, or holds neither a snapshot nor a usage.
absl::StatusOr<v1::RecordRequest> ParseTraceLine(std::string_view line);

// Reads the trace at `path`. Returns NotFound when the file cannot be
// opened; lines that do not parse are listed in Trace::errors.
absl::StatusOr<Trace> ReadTrace(const std::string& path);

// The client timestamp of a record: the snapshot's request time or the
// usage's response time, in microseconds since the epoch.
int64_t RecordTimeMicros(const v1::RecordRequest& record);

// Shifts the record's client timestamp by `delta_us`.
void ShiftRecordTime(int64_t delta_us, v1::RecordRequest& record);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_TRACE_H_
