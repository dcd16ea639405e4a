#include "cli/trace.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cachewatch::cli {

using google::protobuf::util::TimeUtil;

absl::StatusOr<v1::RecordRequest> ParseTraceLine(std::string_view line) {
  v1::RecordRequest record;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(line), &record);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a cachewatch.v1.RecordRequest: ", std::string(status.message())));
  }
  if (record.record_case() == v1::RecordRequest::RECORD_NOT_SET) {
    return absl::InvalidArgumentError(
        "record: one of snapshot or usage is required");
  }
  return record;
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  Trace trace;
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<v1::RecordRequest> record = ParseTraceLine(line);
    if (record.ok()) {
      trace.records.push_back({number, *std::move(record)});
    } else {
      trace.errors.push_back({number, record.status()});
    }
  }
  if (file.bad())
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  return trace;
}

int64_t RecordTimeMicros(const v1::RecordRequest& record) {
  return TimeUtil::TimestampToMicroseconds(
      record.has_snapshot() ? record.snapshot().request_time()
                            : record.usage().response_time());
}

void ShiftRecordTime(int64_t delta_us, v1::RecordRequest& record) {
  google::protobuf::Timestamp* time =
      record.has_snapshot() ? record.mutable_snapshot()->mutable_request_time()
                            : record.mutable_usage()->mutable_response_time();
  *time = TimeUtil::MicrosecondsToTimestamp(
      TimeUtil::TimestampToMicroseconds(*time) + delta_us);
}

}  // namespace cachewatch::cli
