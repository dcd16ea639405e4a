// The gRPC receiver: the cachewatch.v1.CacheWatch service (synchronous API,
// but the ingest RPCs on the asynchronous API, on one completion queue and
// its threads: Record in record_stream.h, RecordSnapshot and RecordUsage in
// unary_ingest.h). Ingest RPCs go through the IngestPipeline and answer once
// the record is durable; query RPCs read BreakQueries; WatchBreaks follows
// the BreakHub.
//
// The ingest RPCs receive raw bytes and decode each record themselves
// (record_decoder.h): an undecodable record is answered INVALID_ARGUMENT
// naming the field, never with INTERNAL or the end of its stream.
//
// Thread-safe; gRPC calls the query RPCs from its own thread pool.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>

#include "cachewatch/v1/service.grpc.pb.h"
#include "daemon/exporter/watch/break_hub.h"
#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/grpc/client_gate.h"
#include "daemon/receiver/grpc/record_stream.h"
#include "daemon/receiver/grpc/unary_ingest.h"
#include "daemon/store/break_queries.h"

namespace cachewatch {

class CacheWatchService final
    : public v1::CacheWatch::WithRawMethod_RecordSnapshot<
          v1::CacheWatch::WithRawMethod_RecordUsage<
              v1::CacheWatch::WithRawMethod_Record<v1::CacheWatch::Service>>> {
 public:
  // All pointers must outlive the service. Every call passes `gate`:
  // UNAUTHENTICATED without a valid token (when tokens are configured), and
  // ingest calls are charged to the client's rate limit.
  CacheWatchService(IngestPipeline* pipeline, BreakQueries* queries,
                    BreakHub* hub, ClientGate* gate, const Clock* clock);
  ~CacheWatchService() override { StopRecordQueue(); }

  // Before the server is built: adds the ingest RPCs' completion queue to
  // `builder`.
  void AddRecordQueue(grpc::ServerBuilder* builder) {
    streams_.AddCompletionQueue(builder);
  }
  // After the server started: accepts Record streams and unary ingest
  // calls.
  void StartRecordStreams();
  // After the server's Shutdown returned: waits until every unary ingest
  // call is answered (each within its commit), then stops the ingest queue
  // and its threads (the destructor does it otherwise). Idempotent.
  void StopRecordQueue();

  // For shutdown: refuses new ingest calls and Record streams with
  // UNAVAILABLE, makes every open Record stream acknowledge what it has
  // read and end with UNAVAILABLE (record_stream.h), and ends WatchBreaks
  // calls with UNAVAILABLE.
  void BeginShutdown();
  // After BeginShutdown: waits until every Record stream has ended or
  // `deadline`; true if all ended.
  bool WaitForRecordStreams(std::chrono::steady_clock::time_point deadline) {
    return streams_.WaitUntilAllEnded(deadline);
  }

  grpc::Status ListBreaks(grpc::ServerContext* context,
                          const v1::ListBreaksRequest* request,
                          v1::ListBreaksResponse* response) override;
  grpc::Status ExplainBreak(grpc::ServerContext* context,
                            const v1::ExplainBreakRequest* request,
                            v1::ExplainBreakResponse* response) override;
  grpc::Status WatchBreaks(
      grpc::ServerContext* context, const v1::WatchBreaksRequest* request,
      grpc::ServerWriter<v1::PromptCacheBreak>* writer) override;
  grpc::Status GetLaneTimeline(grpc::ServerContext* context,
                               const v1::GetLaneTimelineRequest* request,
                               v1::GetLaneTimelineResponse* response) override;

 private:
  // The caller's identity, or UNAUTHENTICATED.
  absl::StatusOr<std::string> Authenticate(
      grpc::ServerContextBase* context) const;
  // Authenticates and charges one record; the refusal, if any, is counted.
  absl::Status Admit(grpc::ServerContext* context, RecordKind kind);

  IngestPipeline* const pipeline_;
  BreakQueries* const queries_;
  BreakHub* const hub_;
  ClientGate* const gate_;
  const Clock* const clock_;
  std::atomic<bool> shutting_down_{false};
  // Before streams_, which owns the queue unary_'s calls complete on: the
  // queue's threads end before unary_ is destroyed.
  UnaryIngest unary_;
  RecordStreams streams_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_CACHEWATCH_SERVICE_H_
