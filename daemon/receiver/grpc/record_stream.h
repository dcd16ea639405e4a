// One `Record` call (bidirectional stream) on gRPC's asynchronous API, with
// raw messages: each record is decoded on its own (record_decoder.h), so an
// undecodable one is refused alone with an INVALID_ARGUMENT ack and the
// stream goes on.
//
// Not gRPC's callback API: on gRPC 1.51 (Debian 12), with Record on the
// callback API, the synchronous unary calls stalled for up to 100 ms about
// once a second (the callback API's pollers sleep 100 ms when idle;
// docs/PERFORMANCE.md, "Ack p99 at 50 % load"). Record's calls complete on
// a completion queue of their own that RecordStreams drains with its own
// threads, which block in CompletionQueue::Next and never sleep.
//
// A stream reads and tracks records as they arrive; a committer thread
// makes everything read so far durable in one store write and then queues
// its acks, so a busy stream commits in batches. The acks are written one
// after the other, each from the completion of the one before (no thread
// hand-off per ack). At most kMaxInFlight records wait for a commit or for
// their ack to be written; beyond that the stream stops reading (flow
// control back to the client). An ack with another queued behind it is
// written with gRPC's buffer hint, so that a batch's acks leave in one socket
// write (at most kMaxBufferedAcks a write) instead of one each; the last ack
// queued is always written without it, so no ack waits for a later one.
// The stream's first ack is never hinted: it carries the response headers.
//
// A stream ends with OK when the client half-closes and every ack has been
// written. Stop() (shutdown) makes it read no more, commit and acknowledge
// every record it has read, and end with UNAVAILABLE saying the daemon is
// stopping; a record the client sent that was not acknowledged was not
// stored.
//
// Both classes are thread-safe; a RecordStream deletes itself once its call
// is done and none of its operations is outstanding.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/async_stream.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/grpc/client_gate.h"
#include "daemon/receiver/grpc/queue_tag.h"
#include "daemon/receiver/grpc/snapshot_pool.h"

namespace cachewatch {

class RecordStream;

using RecordCall =
    grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// The Record method's server side: the completion queue its calls run on,
// the threads that drain it, and the set of open streams.
//
// Lifecycle: AddCompletionQueue before the server is built; Start after it
// started; StopAll and WaitUntilAllEnded for shutdown; Shutdown once the
// server's Shutdown has returned (or the destructor does it).
class RecordStreams {
 public:
  // Asks gRPC for the next Record call (the generated RequestRecord).
  using RequestCall =
      std::function<void(grpc::ServerContext*, RecordCall*,
                         grpc::ServerCompletionQueue*, void* tag)>;
  // The caller's identity, or why it is refused (UNAUTHENTICATED).
  using Authenticate =
      std::function<absl::StatusOr<std::string>(grpc::ServerContextBase*)>;

  // The pointers must outlive this object.
  RecordStreams(IngestPipeline* pipeline, ClientGate* gate, const Clock* clock,
                RequestCall request_call, Authenticate authenticate);
  ~RecordStreams();
  RecordStreams(const RecordStreams&) = delete;
  RecordStreams& operator=(const RecordStreams&) = delete;

  // Adds Record's completion queue to `builder`.
  void AddCompletionQueue(grpc::ServerBuilder* builder);
  // The queue, for other calls whose tags are QueueTags (unary_ingest.h):
  // its threads complete them too. Valid from AddCompletionQueue to
  // Shutdown.
  grpc::ServerCompletionQueue* queue() const { return queue_.get(); }
  // Starts accepting Record calls, with `threads` threads draining the
  // queue.
  void Start(int threads);
  // Stops every open stream and refuses new ones with UNAVAILABLE.
  void StopAll();
  // Waits until every stream has ended or `deadline`; true if all ended.
  bool WaitUntilAllEnded(std::chrono::steady_clock::time_point deadline);
  // After the server's Shutdown returned: accepts no more calls, shuts the
  // queue down and waits for its threads. Idempotent.
  void Shutdown();

 private:
  friend class RecordStream;
  // Asks for the next call unless Shutdown began.
  void RequestNext();
  bool Add(RecordStream* stream);
  void Remove(RecordStream* stream);
  void Drain();

  IngestPipeline* const pipeline_;
  ClientGate* const gate_;
  const Clock* const clock_;
  const RequestCall request_call_;
  const Authenticate authenticate_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::vector<std::thread> threads_;
  // The streams' snapshots are decoded into these messages.
  SnapshotPool snapshots_;

  std::mutex mutex_;
  std::condition_variable ended_;
  bool accepting_ = false;           // Guarded by mutex_.
  bool stopping_ = false;            // Guarded by mutex_.
  std::set<RecordStream*> streams_;  // Guarded by mutex_.
};

class RecordStream final {
 public:
  // Records a stream may have read but not yet committed.
  static constexpr size_t kMaxInFlight = 1024;
  // Most acks written in a row with gRPC's buffer hint, i.e. most acks one
  // socket write carries.
  static constexpr int kMaxBufferedAcks = 64;
  // The status of a stream the daemon ended because it is stopping.
  static grpc::Status StoppingStatus();

  // Waits for the next Record call on `streams`' queue.
  explicit RecordStream(RecordStreams* streams);

  // For shutdown; see the file comment.
  void Stop();

 private:
  ~RecordStream() = default;
  // The completions of the four kinds of operation.
  void OnStarted(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone(bool ok);
  // The committer thread's loop.
  void CommitAndAcknowledge();
  // Decodes, admits and tracks one record.
  ProcessedRecord Process(const grpc::ByteBuffer& message);
  // Require mutex_. Starts the next read when the stream still reads and
  // has room in flight; starts writing the oldest queued ack when no write
  // is outstanding; finishes the call once the committer is done and every
  // ack is written (or the client is gone).
  void MaybeStartRead();
  void MaybeStartWrite();
  void MaybeFinish();
  void FinishLocked(const grpc::Status& status);
  // Requires mutex_: the call is over and nothing is outstanding.
  bool DoneLocked() const;
  // Called without mutex_ once DoneLocked: ends the stream and deletes it.
  void Destroy();

  RecordStreams* const streams_;
  grpc::ServerContext context_;
  RecordCall call_;
  MemberTag<RecordStream> started_{this, &RecordStream::OnStarted};
  MemberTag<RecordStream> read_{this, &RecordStream::OnReadDone};
  MemberTag<RecordStream> written_{this, &RecordStream::OnWriteDone};
  MemberTag<RecordStream> finished_op_{this, &RecordStream::OnFinishDone};
  std::string client_;            // Set before the first read.
  grpc::ByteBuffer read_buffer_;  // Owned by the outstanding read.

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<ProcessedRecord> in_flight_;  // Guarded by mutex_.
  // Acks of committed records, oldest first; while writing_, the front is
  // the outstanding write's. Guarded by mutex_.
  std::deque<grpc::ByteBuffer> acks_;
  bool reading_ = false;        // A read is outstanding. Guarded by mutex_.
  bool read_ended_ = false;     // The client half-closed or left.
  bool stopping_ = false;       // Stop() was called. Guarded by mutex_.
  bool committed_all_ = false;  // The committer is done. Guarded by mutex_.
  bool writing_ = false;        // A write is outstanding. Guarded by mutex_.
  bool write_ok_ = true;        // Every write so far. Guarded by mutex_.
  bool finished_ = false;       // Finish() was called. Guarded by mutex_.
  bool finish_done_ = false;    // Finish completed. Guarded by mutex_.
  // A write was started (the first carries the response headers, which the
  // buffer hint would hold back). Guarded by mutex_.
  bool wrote_ = false;
  // Writes started with the buffer hint since the last one without it.
  // Guarded by mutex_.
  int buffered_acks_ = 0;
  std::thread committer_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_
