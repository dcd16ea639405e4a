// One `Record` call (bidirectional stream) on gRPC's callback API, with raw
// messages: each record is decoded on its own (record_decoder.h), so an
// undecodable one is refused alone with an INVALID_ARGUMENT ack and the
// stream goes on.
//
// The reactor reads and tracks records as they arrive; a committer thread
// makes everything read so far durable in one store write and then
// acknowledges it, so a busy stream commits in batches. At most
// kMaxInFlight records wait for a commit; beyond that the reactor stops
// reading (flow control back to the client).
//
// A stream ends with OK when the client half-closes and every ack has been
// written. Stop() (shutdown) makes it read no more, commit and acknowledge
// every record it has read, and end with UNAVAILABLE saying the daemon is
// stopping; a record the client sent that was not acknowledged was not
// stored.
//
// RecordStreams tracks the open streams for shutdown. Both classes are
// thread-safe; a RecordStream deletes itself when its call is done.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "daemon/pipeline/clock.h"
#include "daemon/pipeline/ingest_pipeline.h"
#include "daemon/receiver/grpc/client_gate.h"

namespace cachewatch {

class RecordStream;

// The set of open Record streams.
class RecordStreams {
 public:
  // Stops every open stream and refuses new ones (Add answers false).
  void StopAll();
  // Waits until every stream has ended or `deadline`; true if all ended.
  bool WaitUntilAllEnded(std::chrono::steady_clock::time_point deadline);

 private:
  friend class RecordStream;
  bool Add(RecordStream* stream);
  void Remove(RecordStream* stream);

  std::mutex mutex_;
  std::condition_variable ended_;
  bool stopping_ = false;            // Guarded by mutex_.
  std::set<RecordStream*> streams_;  // Guarded by mutex_.
};

class RecordStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Records a stream may have read but not yet committed.
  static constexpr size_t kMaxInFlight = 1024;
  // The status of a stream the daemon ended because it is stopping.
  static grpc::Status StoppingStatus();

  // Starts a stream for the authenticated `client`, or, when `refusal` is
  // not OK, ends it at once with that status. The pointers must outlive
  // every stream.
  RecordStream(absl::Status refusal, std::string client,
               IngestPipeline* pipeline, ClientGate* gate, const Clock* clock,
               RecordStreams* streams);

  // For shutdown; see the file comment.
  void Stop();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  ~RecordStream() override = default;
  // The committer thread's loop.
  void CommitAndAcknowledge();
  // Decodes, admits and tracks one record.
  ProcessedRecord Process(const grpc::ByteBuffer& message);
  // Writes one ack and waits for it to be sent; false if the call is gone.
  bool WriteAck(const v1::RecordAck& ack);

  const std::string client_;
  IngestPipeline* const pipeline_;
  ClientGate* const gate_;
  const Clock* const clock_;
  RecordStreams* const streams_;
  grpc::ByteBuffer read_buffer_;   // Owned by the outstanding read.
  grpc::ByteBuffer write_buffer_;  // Owned by the outstanding write.

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<ProcessedRecord> in_flight_;  // Guarded by mutex_.
  bool reading_ = false;        // A read is outstanding. Guarded by mutex_.
  bool read_ended_ = false;     // The client half-closed or left.
  bool stopping_ = false;       // Stop() was called. Guarded by mutex_.
  bool committed_all_ = false;  // The committer is done. Guarded by mutex_.
  bool writing_ = false;        // A write is outstanding. Guarded by mutex_.
  bool write_ok_ = true;        // Of the last write. Guarded by mutex_.
  std::thread committer_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_STREAM_H_
