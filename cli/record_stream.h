// A client of the daemon's bidirectional Record stream: sends records in
// order and tallies the acknowledgements as they come back.
//
// Not thread-safe for callers: one thread sends and finishes; the stream's
// acknowledgements are read on a thread of its own.
#ifndef CACHEWATCH_CLI_RECORD_STREAM_H_
#define CACHEWATCH_CLI_RECORD_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/service.grpc.pb.h"
#include "cli/command.h"

namespace cachewatch::cli {

struct AckTally {
  int acknowledged = 0;
  int duplicates = 0;
  std::map<int, int> by_code;  // google.rpc.Code -> acknowledgements.
  // "request_id: message" of the first few refusals.
  std::vector<std::string> first_refusals;
  // Verdicts of acknowledged usages, and the primary reason of each break.
  std::map<v1::Verdict, int> verdicts;
  std::map<v1::Reason, int> breaks_by_reason;

  int refused() const;
};

// A few lines on how `sent` records were acknowledged: counts by code, the
// first refusals, the verdicts and the breaks by primary reason.
std::string DescribeTally(const AckTally& tally, int64_t sent);

class RecordStream {
 public:
  // Opens the stream on `stub`, which must outlive it.
  RecordStream(v1::CacheWatch::Stub& stub, const GlobalOptions& options);
  ~RecordStream();

  RecordStream(const RecordStream&) = delete;
  RecordStream& operator=(const RecordStream&) = delete;

  // Sends one record. Returns false when the stream has broken (Finish
  // says why).
  bool Send(const v1::RecordRequest& record);

  // Half-closes the stream, waits for the remaining acknowledgements and
  // returns them, or the error that ended the stream.
  absl::StatusOr<AckTally> Finish();

 private:
  void ReadAcks();

  const GlobalOptions options_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::RecordRequest, v1::RecordAck>>
      stream_;
  std::thread reader_;
  std::mutex mutex_;
  AckTally tally_;  // Guarded by mutex_.
  bool finished_ = false;
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_RECORD_STREAM_H_
