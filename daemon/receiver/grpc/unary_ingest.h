// RecordSnapshot and RecordUsage on gRPC's asynchronous API, with raw
// messages, on the completion queue and threads Record's streams use
// (record_stream.h) instead of gRPC's synchronous thread pool.
//
// A call is decoded (record_decoder.h), admitted (the service's client gate:
// token, shutdown, rate limit) and tracked by the IngestPipeline on the
// queue thread that received it; a call refused on the way is answered at
// once. An accepted record is then handed to the store's group commit
// (IngestPipeline::CommitAsync): it enters the store's bounded queue at once
// — a full queue refuses it there, RESOURCE_EXHAUSTED naming
// --max-queued-records, and the call is answered with that — and the call is
// answered from the commit's callback, on the thread that led the commit
// (this queue thread itself when no commit was in flight, else whichever
// caller's). No thread sleeps waiting for another's commit, so calls that
// arrive during a commit share the next one. A call is answered only once its
// record's commit returned, with the same response and status the
// synchronous handlers gave.
//
// An answer's completion (the call's Finish) goes to a completion queue of
// this object's that nothing polls, not to the ingest queue: on the ingest
// queue it woke another of its threads out of epoll (an eventfd write and a
// context switch per call, docs/PERFORMANCE.md round 10a). The queue threads
// reap those completions (and so delete the calls) after serving each new
// call; the rest are reaped by WaitUntilAnswered.
//
// Lifecycle: Start after the server started (with the queue's threads
// running or about to); StopAccepting, then WaitUntilAnswered, after the
// server's Shutdown returned and before the queue shuts down (no call may
// start an operation on a queue shut down). Thread-safe; each call is
// deleted once its answer's completion is reaped (or the server shut down
// before it came).
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_unary_call.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "absl/status/status.h"
#include "daemon/pipeline/ingest_pipeline.h"

namespace cachewatch {

class UnaryIngest {
 public:
  // Asks gRPC for the next call of one method (the generated
  // RequestRecordSnapshot or RequestRecordUsage): the call's operations
  // complete on `call_queue`, its arrival (`tag`) on `new_call_queue`.
  using RequestCall = std::function<void(
      grpc::ServerContext*, grpc::ByteBuffer*,
      grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>*,
      grpc::CompletionQueue* call_queue,
      grpc::ServerCompletionQueue* new_call_queue, void* tag)>;
  // Authenticates and charges one record; the refusal, if any, is counted.
  using Admit = std::function<absl::Status(grpc::ServerContext*, RecordKind)>;

  // `pipeline` must outlive this object.
  UnaryIngest(IngestPipeline* pipeline, RequestCall request_snapshot,
              RequestCall request_usage, Admit admit);
  UnaryIngest(const UnaryIngest&) = delete;
  UnaryIngest& operator=(const UnaryIngest&) = delete;

  // Starts accepting calls on `queue`, `calls` of each method requested
  // ahead. `queue` must be drained by its threads until StopAccepting and
  // WaitUntilAnswered returned.
  void Start(grpc::ServerCompletionQueue* queue, int calls);
  // Requests no more calls. Idempotent.
  void StopAccepting();
  // Blocks until every call requested has been answered (its commit
  // returned and its answer was sent or failed) or given up (the server
  // shut down before it came), and deleted. Call after StopAccepting, once
  // the server's Shutdown returned; once only.
  void WaitUntilAnswered();

 private:
  class Call;

  // Asks for the next call of `kind` unless StopAccepting was called.
  void RequestNext(RecordKind kind);
  // Decodes, admits and tracks `call`'s record; answers a refusal at once,
  // else hands it to the pipeline's asynchronous commit.
  void Serve(Call* call);
  // A requested call was answered or given up: it starts no more
  // operations.
  void Answered();
  // Completes the answers whose completions are queued on answers_
  // (deleting their calls), without waiting for the others.
  void ReapAnswers();

  IngestPipeline* const pipeline_;
  const RequestCall request_snapshot_;
  const RequestCall request_usage_;
  const Admit admit_;

  // Where the calls' answers complete; not polled (see the file comment).
  grpc::CompletionQueue answers_;
  // Answers started and not yet reaped from answers_.
  std::atomic<int64_t> unreaped_{0};

  std::mutex mutex_;
  std::condition_variable answered_;
  grpc::ServerCompletionQueue* queue_ = nullptr;  // Guarded by mutex_.
  bool accepting_ = false;                        // Guarded by mutex_.
  // Calls requested and not yet answered or given up. Guarded by mutex_.
  int64_t unanswered_ = 0;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_UNARY_INGEST_H_
