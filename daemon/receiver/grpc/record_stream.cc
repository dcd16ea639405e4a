#include "daemon/receiver/grpc/record_stream.h"

#include <utility>
#include <vector>

#include "daemon/receiver/grpc/record_decoder.h"

namespace cachewatch {
namespace {

v1::RecordAck AckFor(const ProcessedRecord& record) {
  v1::RecordAck ack;
  ack.set_request_id(record.request_id);
  ack.set_is_usage(record.kind == RecordKind::kUsage);
  ack.set_code(static_cast<int32_t>(record.status.code()));
  ack.set_message(std::string(record.status.message()));
  if (record.status.ok()) {
    ack.set_duplicate(record.duplicate);
    if (record.kind == RecordKind::kUsage)
      *ack.mutable_classification() = record.classification;
  }
  return ack;
}

}  // namespace

void RecordStreams::StopAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  for (RecordStream* stream : streams_) stream->Stop();
}

bool RecordStreams::WaitUntilAllEnded(
    std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return ended_.wait_until(lock, deadline, [this] { return streams_.empty(); });
}

bool RecordStreams::Add(RecordStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return false;
  streams_.insert(stream);
  return true;
}

void RecordStreams::Remove(RecordStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.erase(stream);
  }
  ended_.notify_all();
}

grpc::Status RecordStream::StoppingStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "cachewatchd is stopping: every record acknowledged "
                      "is stored; resend the others once it is back");
}

RecordStream::RecordStream(absl::Status refusal, std::string client,
                           IngestPipeline* pipeline, ClientGate* gate,
                           const Clock* clock, RecordStreams* streams)
    : client_(std::move(client)),
      pipeline_(pipeline),
      gate_(gate),
      clock_(clock),
      streams_(streams) {
  if (!refusal.ok()) {
    Finish(grpc::Status(static_cast<grpc::StatusCode>(refusal.code()),
                        std::string(refusal.message())));
    return;
  }
  if (!streams_->Add(this)) {
    Finish(StoppingStatus());
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  reading_ = true;
  StartRead(&read_buffer_);
  committer_ = std::thread([this] { CommitAndAcknowledge(); });
}

void RecordStream::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

ProcessedRecord RecordStream::Process(const grpc::ByteBuffer& message) {
  v1::RecordRequest request;
  if (absl::Status decoded = DecodeMessage(message, request); !decoded.ok()) {
    const RecordIdentity identity =
        PeekRecordIdentity(FlattenByteBuffer(message));
    ProcessedRecord record = pipeline_->Reject(
        identity.is_usage ? RecordKind::kUsage : RecordKind::kSnapshot,
        decoded);
    record.request_id = identity.request_id;
    return record;
  }
  const absl::Status admitted = gate_->Admit(client_, 1, clock_->NowMicros());
  ProcessedRecord record =
      !admitted.ok()
          ? pipeline_->Reject(request.has_usage() ? RecordKind::kUsage
                                                  : RecordKind::kSnapshot,
                              admitted)
      : request.has_snapshot()
          ? pipeline_->ProcessSnapshot(std::move(*request.mutable_snapshot()))
      : request.has_usage()
          ? pipeline_->ProcessUsage(std::move(*request.mutable_usage()))
          : pipeline_->Reject(
                RecordKind::kSnapshot,
                absl::InvalidArgumentError("record: one of snapshot or "
                                           "usage is required"));
  if (record.request_id.empty()) {
    record.request_id = request.has_usage() ? request.usage().request_id()
                                            : request.snapshot().request_id();
  }
  return record;
}

void RecordStream::OnReadDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reading_ = false;
    if (!ok) {
      read_ended_ = true;
    } else if (!committed_all_) {
      // Tracked under the lock, so that the committer, which finishes only
      // with nothing in flight, never leaves a tracked record uncommitted.
      in_flight_.push_back(Process(read_buffer_));
      if (in_flight_.size() < kMaxInFlight && !stopping_) {
        reading_ = true;
        StartRead(&read_buffer_);
      }
    }
  }
  changed_.notify_all();
}

void RecordStream::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    write_ok_ = ok;
  }
  changed_.notify_all();
}

bool RecordStream::WriteAck(const v1::RecordAck& ack) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool own_buffer = false;
  write_buffer_.Clear();  // The last write is done with it.
  grpc::SerializationTraits<v1::RecordAck>::Serialize(ack, &write_buffer_,
                                                      &own_buffer);
  writing_ = true;
  StartWrite(&write_buffer_);
  changed_.wait(lock, [this] { return !writing_; });
  return write_ok_;
}

void RecordStream::CommitAndAcknowledge() {
  bool client_listening = true;
  for (;;) {
    std::deque<ProcessedRecord> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] {
        return !in_flight_.empty() || read_ended_ || stopping_;
      });
      if (in_flight_.empty()) {
        committed_all_ = true;
        break;
      }
      batch.swap(in_flight_);
      if (!reading_ && !read_ended_ && !stopping_) {
        reading_ = true;
        StartRead(&read_buffer_);
      }
    }
    std::vector<ProcessedRecord*> pointers;
    for (ProcessedRecord& record : batch) pointers.push_back(&record);
    // Committed even when the client has left: the tracker has seen them.
    pipeline_->Commit(pointers);
    for (const ProcessedRecord& record : batch) {
      if (client_listening) client_listening = WriteAck(AckFor(record));
    }
  }
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping = stopping_;
  }
  // The last use of `this` on this thread: OnDone may follow at once.
  Finish(stopping ? StoppingStatus() : grpc::Status::OK);
}

void RecordStream::OnDone() {
  streams_->Remove(this);
  std::thread committer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    committer = std::move(committer_);
  }
  if (committer.joinable()) committer.join();
  delete this;
}

}  // namespace cachewatch
