#include "daemon/receiver/grpc/record_stream.h"

#include <iterator>
#include <memory>
#include <string_view>
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

RecordStreams::RecordStreams(IngestPipeline* pipeline, ClientGate* gate,
                             const Clock* clock, RequestCall request_call,
                             Authenticate authenticate)
    : pipeline_(pipeline),
      gate_(gate),
      clock_(clock),
      request_call_(std::move(request_call)),
      authenticate_(std::move(authenticate)) {}

RecordStreams::~RecordStreams() { Shutdown(); }

void RecordStreams::AddCompletionQueue(grpc::ServerBuilder* builder) {
  queue_ = builder->AddCompletionQueue();
}

void RecordStreams::Start(int threads) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = true;
  }
  RequestNext();
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Drain(); });
}

void RecordStreams::Drain() {
  void* tag = nullptr;
  bool ok = false;
  while (queue_->Next(&tag, &ok)) {
    static_cast<QueueTag*>(tag)->Complete(ok);
  }
}

void RecordStreams::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
  }
  if (queue_ == nullptr) return;
  queue_->Shutdown();
  if (threads_.empty()) Drain();  // Never started: nothing is outstanding.
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  queue_.reset();
}

void RecordStreams::RequestNext() {
  std::lock_guard<std::mutex> lock(mutex_);
  // The stream deletes itself when its call, or the request, is over.
  if (accepting_) new RecordStream(this);
}

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
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.erase(stream);
  ended_.notify_all();
}

grpc::Status RecordStream::StoppingStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "cachewatchd is stopping: every record acknowledged "
                      "is stored; resend the others once it is back");
}

RecordStream::RecordStream(RecordStreams* streams)
    : streams_(streams), call_(&context_) {
  streams_->request_call_(&context_, &call_, streams_->queue_.get(),
                          started_.Tag());
}

void RecordStream::OnStarted(bool ok) {
  if (!ok) {  // The server is shutting down: no call came.
    delete this;
    return;
  }
  streams_->RequestNext();
  absl::StatusOr<std::string> client = streams_->authenticate_(&context_);
  if (!client.ok()) {
    streams_->pipeline_->Reject(RecordKind::kSnapshot, client.status());
    std::lock_guard<std::mutex> lock(mutex_);
    FinishLocked(
        grpc::Status(static_cast<grpc::StatusCode>(client.status().code()),
                     std::string(client.status().message())));
    return;
  }
  // Added before locking mutex_: StopAll locks the set, then each stream.
  const bool added = streams_->Add(this);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!added) {
    FinishLocked(StoppingStatus());
    return;
  }
  client_ = *std::move(client);
  MaybeStartRead();
  committer_ = std::thread([this] { CommitAndAcknowledge(); });
}

void RecordStream::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  changed_.notify_all();
}

ProcessedRecord RecordStream::Process(const grpc::ByteBuffer& message) {
  IngestPipeline* const pipeline = streams_->pipeline_;
  const grpc::Slice slice = SingleSlice(message);
  const std::string_view bytes(reinterpret_cast<const char*>(slice.begin()),
                               slice.size());
  // The common case: a snapshot alone, decoded into a reused message.
  if (std::shared_ptr<v1::Snapshot> snapshot = streams_->snapshots_.Acquire();
      DecodeSnapshotRecord(bytes, *snapshot)) {
    const absl::Status admitted =
        streams_->gate_->Admit(client_, 1, streams_->clock_->NowMicros());
    if (!admitted.ok()) {
      ProcessedRecord record =
          pipeline->Reject(RecordKind::kSnapshot, admitted);
      record.request_id = snapshot->request_id();
      return record;
    }
    return pipeline->ProcessSnapshot(
        std::shared_ptr<const v1::Snapshot>(std::move(snapshot)));
  }
  v1::RecordRequest request;
  if (absl::Status decoded = DecodeMessage(bytes, request); !decoded.ok()) {
    const RecordIdentity identity = PeekRecordIdentity(bytes);
    ProcessedRecord record = pipeline->Reject(
        identity.is_usage ? RecordKind::kUsage : RecordKind::kSnapshot,
        decoded);
    record.request_id = identity.request_id;
    return record;
  }
  const absl::Status admitted =
      streams_->gate_->Admit(client_, 1, streams_->clock_->NowMicros());
  ProcessedRecord record =
      !admitted.ok()
          ? pipeline->Reject(request.has_usage() ? RecordKind::kUsage
                                                 : RecordKind::kSnapshot,
                             admitted)
      : request.has_snapshot()
          ? pipeline->ProcessSnapshot(std::move(*request.mutable_snapshot()))
      : request.has_usage()
          ? pipeline->ProcessUsage(std::move(*request.mutable_usage()))
          : pipeline->Reject(
                RecordKind::kSnapshot,
                absl::InvalidArgumentError("record: one of snapshot or "
                                           "usage is required"));
  if (record.request_id.empty()) {
    record.request_id = request.has_usage() ? request.usage().request_id()
                                            : request.snapshot().request_id();
  }
  return record;
}

void RecordStream::MaybeStartRead() {
  if (reading_ || read_ended_ || stopping_ || committed_all_ ||
      in_flight_.size() + acks_.size() >= kMaxInFlight) {
    return;
  }
  reading_ = true;
  call_.Read(&read_buffer_, read_.Tag());
}

void RecordStream::MaybeStartWrite() {
  if (writing_ || acks_.empty() || !write_ok_) return;
  writing_ = true;
  grpc::WriteOptions options;
  if (wrote_ && acks_.size() > 1 && buffered_acks_ < kMaxBufferedAcks) {
    options.set_buffer_hint();
    ++buffered_acks_;
  } else {
    buffered_acks_ = 0;
  }
  wrote_ = true;
  call_.Write(acks_.front(), options, written_.Tag());
}

void RecordStream::MaybeFinish() {
  if (finished_ || !committed_all_ || writing_ ||
      (write_ok_ && !acks_.empty())) {
    return;
  }
  FinishLocked(stopping_ ? StoppingStatus() : grpc::Status::OK);
}

void RecordStream::FinishLocked(const grpc::Status& status) {
  finished_ = true;
  // An outstanding read (the daemon is stopping) completes when the call
  // is over.
  call_.Finish(status, finished_op_.Tag());
}

bool RecordStream::DoneLocked() const {
  return finish_done_ && !reading_ && !writing_;
}

void RecordStream::OnReadDone(bool ok) {
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reading_ = false;
    if (!ok) {
      read_ended_ = true;
    } else if (!committed_all_) {
      // Tracked under the lock, so that the committer, which finishes only
      // with nothing in flight, never leaves a tracked record uncommitted.
      in_flight_.push_back(Process(read_buffer_));
      MaybeStartRead();
    }
    // Under the lock: once it is released, another thread may end the
    // stream.
    changed_.notify_all();
    done = DoneLocked();
  }
  if (done) Destroy();
}

void RecordStream::OnWriteDone(bool ok) {
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    acks_.pop_front();
    if (!ok) {  // The client is gone: its other acks have no one to read them.
      write_ok_ = false;
      acks_.clear();
    }
    MaybeStartWrite();
    MaybeStartRead();
    MaybeFinish();
    done = DoneLocked();
  }
  if (done) Destroy();
}

void RecordStream::OnFinishDone(bool /*ok*/) {
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finish_done_ = true;
    done = DoneLocked();
  }
  if (done) Destroy();
}

void RecordStream::CommitAndAcknowledge() {
  for (;;) {
    std::deque<ProcessedRecord> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] {
        return !in_flight_.empty() || read_ended_ || stopping_;
      });
      if (in_flight_.empty()) {
        committed_all_ = true;
        // The last use of `this` on this thread (Destroy joins it).
        MaybeFinish();
        return;
      }
      batch.swap(in_flight_);
      MaybeStartRead();
    }
    std::vector<ProcessedRecord*> pointers;
    for (ProcessedRecord& record : batch) pointers.push_back(&record);
    // Committed even when the client has left: the tracker has seen them.
    streams_->pipeline_->Commit(pointers);
    std::deque<grpc::ByteBuffer> acks(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      bool own_buffer = false;
      grpc::SerializationTraits<v1::RecordAck>::Serialize(
          AckFor(batch[i]), &acks[i], &own_buffer);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (write_ok_) {
      std::move(acks.begin(), acks.end(), std::back_inserter(acks_));
    }
    MaybeStartWrite();
  }
}

void RecordStream::Destroy() {
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
