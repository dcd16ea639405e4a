// RecordSnapshot and RecordUsage on gRPC's asynchronous API, with raw
// messages, on the completion queue and threads Record's streams use
// (record_stream.h) instead of gRPC's synchronous thread pool.
//
// A call is decoded (record_decoder.h), admitted (the service's client gate:
// token, shutdown, rate limit) and tracked by the IngestPipeline on the
// queue thread that received it; a call refused on the way is answered at
// once. An accepted record then waits for a commit, and commits are
// combined: the thread that queues a record while no unary commit is in
// flight commits every record queued (one IngestPipeline::Commit, i.e. one
// store write), answers those calls, and goes on while more were queued in
// the meantime; a thread that finds a commit in flight leaves its record to
// it and goes back to the queue. No thread sleeps waiting for another's
// commit. A call is answered only once its record's Commit returned, with
// the same response and status the synchronous handlers gave.
//
// Lifecycle: Start after the server started (with the queue's threads
// running or about to); StopAccepting before the queue shuts down, after
// the server's Shutdown returned. Thread-safe; each call deletes itself once
// it is answered (or the server shut down before it came).
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_unary_call.h>

#include <functional>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pipeline/ingest_pipeline.h"

namespace cachewatch {

class UnaryIngest {
 public:
  // Asks gRPC for the next call of one method (the generated
  // RequestRecordSnapshot or RequestRecordUsage).
  using RequestCall =
      std::function<void(grpc::ServerContext*, grpc::ByteBuffer*,
                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>*,
                         grpc::ServerCompletionQueue*, void* tag)>;
  // Authenticates and charges one record; the refusal, if any, is counted.
  using Admit = std::function<absl::Status(grpc::ServerContext*, RecordKind)>;

  // `pipeline` must outlive this object.
  UnaryIngest(IngestPipeline* pipeline, RequestCall request_snapshot,
              RequestCall request_usage, Admit admit);
  UnaryIngest(const UnaryIngest&) = delete;
  UnaryIngest& operator=(const UnaryIngest&) = delete;

  // Starts accepting calls on `queue`, `calls` of each method requested
  // ahead. `queue` must be drained by its threads until StopAccepting.
  void Start(grpc::ServerCompletionQueue* queue, int calls);
  // Requests no more calls. Idempotent.
  void StopAccepting();

 private:
  class Call;

  // Asks for the next call of `kind` unless StopAccepting was called.
  void RequestNext(RecordKind kind);
  // Decodes, admits and tracks `call`'s record; answers a refusal at once,
  // else commits it (see the file comment).
  void Serve(Call* call);
  void CommitAndAnswer(Call* call);

  IngestPipeline* const pipeline_;
  const RequestCall request_snapshot_;
  const RequestCall request_usage_;
  const Admit admit_;

  std::mutex mutex_;
  grpc::ServerCompletionQueue* queue_ = nullptr;  // Guarded by mutex_.
  bool accepting_ = false;                        // Guarded by mutex_.
  // Accepted calls waiting for the next commit. Guarded by mutex_.
  std::vector<Call*> pending_;
  bool committing_ = false;  // A thread commits. Guarded by mutex_.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_
