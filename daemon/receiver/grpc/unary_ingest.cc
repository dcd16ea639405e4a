#include "daemon/receiver/grpc/unary_ingest.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <string>
#include <utility>

#include "cachewatch/v1/service.pb.h"
#include "daemon/receiver/grpc/grpc_status.h"
#include "daemon/receiver/grpc/queue_tag.h"
#include "daemon/receiver/grpc/record_decoder.h"

namespace cachewatch {
namespace {

// A completion queue for Next and AsyncNext that no thread polls: ending an
// operation on it wakes no poller.
grpc_completion_queue* NonPollingQueue() {
  const grpc_completion_queue_attributes attributes = {
      GRPC_CQ_CURRENT_VERSION, GRPC_CQ_NEXT, GRPC_CQ_NON_POLLING, nullptr};
  return grpc_completion_queue_create(
      grpc_completion_queue_factory_lookup(&attributes), &attributes, nullptr);
}

template <typename Response>
grpc::ByteBuffer Serialized(const Response& response) {
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  grpc::SerializationTraits<Response>::Serialize(response, &bytes, &own_buffer);
  return bytes;
}

}  // namespace

// One RecordSnapshot or RecordUsage call, from its request to its answer.
class UnaryIngest::Call {
 public:
  Call(UnaryIngest* ingest, RecordKind kind) : ingest_(ingest), kind_(kind) {}

  // Asks gRPC for a call of this kind on `queue`.
  void Request(grpc::ServerCompletionQueue* queue) {
    const RequestCall& request = kind_ == RecordKind::kUsage
                                     ? ingest_->request_usage_
                                     : ingest_->request_snapshot_;
    request(&context_, &request_, &responder_, &ingest_->answers_, queue,
            started_.Tag());
  }

  // Answers with the record's status, and its response when OK. The call
  // may be deleted (on another thread) as soon as this returns.
  void Answer() {
    if (!record_.status.ok()) {
      Refuse(ToGrpc(record_.status));
      return;
    }
    grpc::ByteBuffer reply;
    if (kind_ == RecordKind::kUsage) {
      v1::RecordUsageResponse response;
      response.set_duplicate(record_.duplicate);
      *response.mutable_classification() = record_.classification;
      reply = Serialized(response);
    } else {
      v1::RecordSnapshotResponse response;
      response.set_duplicate(record_.duplicate);
      reply = Serialized(response);
    }
    UnaryIngest* const ingest = ingest_;
    ++ingest->unreaped_;
    responder_.Finish(reply, grpc::Status::OK, finished_.Tag());
    ingest->Answered();
  }
  // As Answer, with `status` instead.
  void Refuse(const grpc::Status& status) {
    UnaryIngest* const ingest = ingest_;
    ++ingest->unreaped_;
    responder_.FinishWithError(status, finished_.Tag());
    ingest->Answered();
  }

  RecordKind kind() const { return kind_; }
  grpc::ServerContext* context() { return &context_; }
  const grpc::ByteBuffer& request() const { return request_; }
  ProcessedRecord& record() { return record_; }

 private:
  ~Call() = default;
  void OnStarted(bool ok) {
    if (!ok) {  // The server is shutting down: no call came.
      UnaryIngest* const ingest = ingest_;
      delete this;
      ingest->Answered();
      return;
    }
    UnaryIngest* const ingest = ingest_;
    ingest->RequestNext(kind_);
    ingest->Serve(this);  // May delete this call.
    ingest->ReapAnswers();
  }
  void OnFinished(bool /*ok*/) {
    UnaryIngest* const ingest = ingest_;
    delete this;
    --ingest->unreaped_;
  }

  UnaryIngest* const ingest_;
  const RecordKind kind_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_{&context_};
  MemberTag<Call> started_{this, &Call::OnStarted};
  MemberTag<Call> finished_{this, &Call::OnFinished};
  ProcessedRecord record_;
};

UnaryIngest::UnaryIngest(IngestPipeline* pipeline, RequestCall request_snapshot,
                         RequestCall request_usage, Admit admit)
    : pipeline_(pipeline),
      request_snapshot_(std::move(request_snapshot)),
      request_usage_(std::move(request_usage)),
      admit_(std::move(admit)),
      answers_(NonPollingQueue()) {}

void UnaryIngest::Start(grpc::ServerCompletionQueue* queue, int calls) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_ = queue;
    accepting_ = true;
  }
  for (int i = 0; i < calls; ++i) {
    RequestNext(RecordKind::kSnapshot);
    RequestNext(RecordKind::kUsage);
  }
}

void UnaryIngest::StopAccepting() {
  std::lock_guard<std::mutex> lock(mutex_);
  accepting_ = false;
}

void UnaryIngest::WaitUntilAnswered() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    answered_.wait(lock, [this] { return unanswered_ == 0; });
  }
  // Every answer has started: Next returns each completion, then false.
  answers_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (answers_.Next(&tag, &ok)) static_cast<QueueTag*>(tag)->Complete(ok);
}

void UnaryIngest::ReapAnswers() {
  void* tag = nullptr;
  bool ok = false;
  while (unreaped_.load() > 0 &&
         answers_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
             grpc::CompletionQueue::GOT_EVENT) {
    static_cast<QueueTag*>(tag)->Complete(ok);
  }
}

void UnaryIngest::RequestNext(RecordKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!accepting_) return;
  ++unanswered_;
  // The call deletes itself when it is answered, or the request is over.
  (new Call(this, kind))->Request(queue_);
}

void UnaryIngest::Answered() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--unanswered_ == 0) answered_.notify_all();
}

void UnaryIngest::Serve(Call* call) {
  const RecordKind kind = call->kind();
  ProcessedRecord& record = call->record();
  if (kind == RecordKind::kUsage) {
    v1::RecordUsageRequest request;
    if (absl::Status decoded = DecodeMessage(call->request(), request);
        !decoded.ok()) {
      pipeline_->Reject(kind, decoded);
      call->Refuse(ToGrpc(decoded));
      return;
    }
    if (absl::Status admitted = admit_(call->context(), kind); !admitted.ok()) {
      call->Refuse(ToGrpc(admitted));
      return;
    }
    record = request.has_usage()
                 ? pipeline_->ProcessUsage(std::move(*request.mutable_usage()))
                 : pipeline_->Reject(
                       kind, absl::InvalidArgumentError("usage: required"));
  } else {
    v1::RecordSnapshotRequest request;
    if (absl::Status decoded = DecodeMessage(call->request(), request);
        !decoded.ok()) {
      pipeline_->Reject(kind, decoded);
      call->Refuse(ToGrpc(decoded));
      return;
    }
    if (absl::Status admitted = admit_(call->context(), kind); !admitted.ok()) {
      call->Refuse(ToGrpc(admitted));
      return;
    }
    record =
        request.has_snapshot()
            ? pipeline_->ProcessSnapshot(std::move(*request.mutable_snapshot()))
            : pipeline_->Reject(
                  kind, absl::InvalidArgumentError("snapshot: required"));
  }
  // A rejected record has nothing to commit: CommitAsync answers it at once.
  pipeline_->CommitAsync({&record}, [call] { call->Answer(); });
}

}  // namespace cachewatch
